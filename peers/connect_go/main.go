// connect_go: the Greeter on connect-go, which serves gRPC, gRPC-Web and the Connect
// protocol from one handler (over HTTP/1.1 and cleartext HTTP/2, or TLS).
// Usage: server PORT [CERT KEY]
//
// It also serves the streaming echo: Feed (server streaming: `count` replies to one request),
// Upload (client streaming: how many messages and payload bytes came) and PingPong (bidi: a
// reply per request, in order). SayHello takes Connect's GET as well as POST.
//
// A call with the header x-want-code: N (1-16) ends with that gRPC code instead, its message
// "asked for code N" and one error detail, so a client's status mapping can be checked
// against each code in each protocol; a stream sends its replies (or reads its requests)
// first, then fails.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	pb "peer/helloworld"
	"peer/helloworld/helloworldconnect"
	spb "peer/streaming"
	"peer/streaming/streamingconnect"
)

// wantedFailure is the error a call's x-want-code header asks for (nil without one).
func wantedFailure(header http.Header) error {
	wanted := header.Get("x-want-code")
	if wanted == "" {
		return nil
	}
	code, err := strconv.Atoi(wanted)
	if err != nil || code < 1 || code > 16 {
		return connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("x-want-code %q is not a code from 1 to 16", wanted))
	}
	failure := connect.NewError(connect.Code(code), fmt.Errorf("asked for code %d", code))
	if detail, err := connect.NewErrorDetail(wrapperspb.String("a detail")); err == nil {
		failure.AddDetail(detail)
	}
	return failure
}

type greeter struct{}

func (greeter) SayHello(
	_ context.Context,
	request *connect.Request[pb.HelloRequest],
) (*connect.Response[pb.HelloReply], error) {
	if failure := wantedFailure(request.Header()); failure != nil {
		return nil, failure
	}
	return connect.NewResponse(&pb.HelloReply{Response: request.Msg.GetRequest()}), nil
}

type echo struct {
	streamingconnect.UnimplementedStreamingEchoHandler
}

func (echo) Feed(
	_ context.Context,
	request *connect.Request[spb.FeedRequest],
	stream *connect.ServerStream[spb.EchoReply],
) error {
	for i := uint32(0); i < request.Msg.GetCount(); i++ {
		reply := &spb.EchoReply{Payload: request.Msg.GetPayload(), Sequence: uint64(i)}
		if err := stream.Send(reply); err != nil {
			return err
		}
	}
	return wantedFailure(request.Header())
}

func (echo) Upload(
	_ context.Context,
	stream *connect.ClientStream[spb.EchoRequest],
) (*connect.Response[spb.UploadSummary], error) {
	var messages, bytes uint64
	for stream.Receive() {
		messages++
		bytes += uint64(len(stream.Msg().GetPayload()))
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if failure := wantedFailure(stream.RequestHeader()); failure != nil {
		return nil, failure
	}
	return connect.NewResponse(&spb.UploadSummary{Messages: messages, Bytes: bytes}), nil
}

func (echo) PingPong(
	_ context.Context,
	stream *connect.BidiStream[spb.EchoRequest, spb.EchoReply],
) error {
	for sequence := uint64(0); ; sequence++ {
		request, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			return wantedFailure(stream.RequestHeader())
		}
		if err != nil {
			return err
		}
		reply := &spb.EchoReply{Payload: request.GetPayload(), Sequence: sequence}
		if err := stream.Send(reply); err != nil {
			return err
		}
	}
}

func main() {
	// GRPC_SERVER_HOST: the address grpclab's harness reaches the server on (its namespace's
	// across --network); loopback otherwise.
	host := os.Getenv("GRPC_SERVER_HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(host, os.Args[1]))
	if err != nil {
		log.Fatalf("cannot listen: %v", err)
	}
	mux := http.NewServeMux()
	// SayHello has no side effects: connect-go then takes its calls as GET too (Connect's
	// GET, `load --connect-get`). The option is set here, not in the scenario's .proto,
	// which every peer shares.
	mux.Handle(helloworldconnect.NewGreeterHandler(greeter{},
		connect.WithIdempotency(connect.IdempotencyNoSideEffects)))
	mux.Handle(streamingconnect.NewStreamingEchoHandler(echo{}))
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	server := &http.Server{Handler: mux, Protocols: protocols}
	if len(os.Args) >= 4 {
		err = server.ServeTLS(listener, os.Args[2], os.Args[3])
	} else {
		err = server.Serve(listener)
	}
	if err != nil {
		log.Fatalf("serve: %v", err)
	}
}
