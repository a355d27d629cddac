module github.com/durachat/durachat/client

go 1.22
