package awslocal

import (
	"encoding/json"
	"encoding/xml"
)

// Answer is an error answer in one of the AWS protocols, for injecting
// faults in front of a local server.
type Answer struct {
	Status      int
	ContentType string
	Body        []byte
}

// DynamoDBError is an error answer in DynamoDB's JSON protocol, e.g.
// (400, "ThrottlingException") or (500, "InternalServerError").
func DynamoDBError(status int, code, message string) Answer {
	return jsonError("com.amazonaws.dynamodb.v20120810#"+code, status, message)
}

// SQSError is an error answer in SQS's JSON protocol.
func SQSError(status int, code, message string) Answer {
	return jsonError("com.amazonaws.sqs#"+code, status, message)
}

func jsonError(typ string, status int, message string) Answer {
	body, _ := json.Marshal(map[string]string{"__type": typ, "message": message})
	return Answer{Status: status, ContentType: "application/x-amz-json-1.0", Body: body}
}

// S3Error is an error answer in S3's XML protocol, e.g. (503, "SlowDown")
// or (409, "ConditionalRequestConflict").
func S3Error(status int, code, message string) Answer {
	body, _ := xml.Marshal(struct {
		XMLName xml.Name `xml:"Error"`
		Code    string
		Message string
	}{Code: code, Message: message})
	return Answer{Status: status, ContentType: "application/xml", Body: append([]byte(xml.Header), body...)}
}
