module sless.dev/runtime

go 1.21
