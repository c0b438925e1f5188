module protomcp-conform/testees/go

go 1.25.6

require github.com/msilverblatt/protomcp/sdk/go v0.3.0

require (
	github.com/klauspost/compress v1.18.4 // indirect
	github.com/msilverblatt/protomcp v0.2.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
