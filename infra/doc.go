// Package infra holds durachat's deployment checks: tests that read
// template.yaml and the Makefile as specifications of the stack (and the
// local SQS server's Node package in infra/sqs, used by the AWS adapter
// tests), and checks of the repository itself: no tracked file over 2 MB,
// build outputs ignored, one license everywhere.
package infra
