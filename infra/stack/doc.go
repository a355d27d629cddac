// Package stack runs durachat's deployed shape on one machine: the four
// function bootstraps under the Lambda Runtime Interface Emulator, behind
// an emulation of the HTTP API and of the SQS event source that reads its
// routes, integrations, authorizer and mapping from template.yaml, over
// local servers that speak the DynamoDB, S3 and SQS protocols.
package stack
