module github.com/svat/partnerapi/clients/go

go 1.26.0

require (
	connectrpc.com/connect v1.21.1
	golang.org/x/oauth2 v0.37.0
	google.golang.org/genproto/googleapis/api v0.0.0-20261019180522-ce908d29299b
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b
	google.golang.org/protobuf v1.36.12
)
