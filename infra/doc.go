// Package infra holds durachat's deployment checks: tests that read
// template.yaml and the Makefile as specifications of the stack (and the
// local SQS server's Node package in infra/sqs, used by the AWS adapter
// tests), and checks of the repository itself: no tracked file over 2 MB,
// build outputs ignored, one license everywhere, and the production code's
// shape by a go/ast count (function length, parameters, complexity), which
// may improve and not worsen (go test -run TestCodeShape -v ./infra/
// prints it).
package infra
