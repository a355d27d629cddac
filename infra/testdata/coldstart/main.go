// Command coldstart is the baseline of the cold start benchmark: a Lambda
// function that links only the runtime client and answers nothing.
package main

import "github.com/aws/aws-lambda-go/lambda"

func main() {
	lambda.Start(func() error { return nil })
}
