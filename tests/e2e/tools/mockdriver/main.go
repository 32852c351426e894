// Command mockdriver serves the Kubernetes end-to-end CSI mock driver
// (k8s.io/kubernetes/test/e2e/storage/drivers/csi-test) on a unix socket, for the
// csi-attacher end-to-end suite.
//
// ListVolumes is changed to report the real publications (see recordingService.ListVolumes).
//
// The driver keeps its volumes in memory. With --state-file the volumes created through
// CreateVolume and the ControllerPublish/Unpublish state are recorded in a JSON file and
// replayed at start, so a restarted driver still knows the volumes of the previous run
// (as csi-driver-host-path does with its state directory).
//
// Every gRPC call is logged as a line `gRPCCall: {"Method":...,"Request":...,"Response":...,
// "Error":...,"FullError":...,"ReceivedMs":...}` at verbosity 3, the format of the csi-test driver
// package's own interceptor (k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/driver, logGRPC)
// plus the time the call arrived (ms since the epoch; the line's own time is when it ended).
//
// With --fault-file the controller's ControllerPublishVolume and ControllerUnpublishVolume calls
// meet the fault that file describes while it lasts (see fault): they hang, fail with a gRPC code,
// or are served late. The file is read at every such call, so a test changes the fault by
// rewriting it; no file, or an ended fault, serves calls as usual.
//
// With --abort-busy-volumes a ControllerPublishVolume or ControllerUnpublishVolume for a volume
// that has one of them in progress is answered ABORTED at once, as the CSI spec recommends
// ("Concurrency": "the Plugin SHOULD return ABORTED ... operation pending for volume"); without it,
// as the mock service does, a late publish can land after a later unpublish. That package's
// server is not used: its Stop calls grpc-go's Server.Stop, which closes every connection at once.
// SIGTERM or SIGINT here calls Server.GracefulStop, as CSI drivers built on csi-lib-utils or
// csi-driver-host-path do: no new connections, a GOAWAY on each open one, the calls in flight
// finish, then the connections close. "graceful stop complete" in the log says it did not need the
// fallback (Server.Stop after gracePeriod).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

// gracePeriod bounds GracefulStop (which waits for the calls in flight and for the clients to
// close their connections after its GOAWAY); after it the server stops at once.
const gracePeriod = 4 * time.Second

// state is what --state-file holds: volumes in creation order and the published pairs.
type state struct {
	Volumes   []string          `json:"volumes"`
	Published map[string]string `json:"published"` // volume ID -> node ID
	Readonly  map[string]bool   `json:"readonly"`
}

type recorder struct {
	mu    sync.Mutex
	path  string
	state state
}

func (r *recorder) save() error {
	data, err := json.Marshal(r.state)
	if err != nil {
		return err
	}
	tmp := r.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, r.path)
}

// recordingService is the mock service plus the recorder: successful CreateVolume,
// ControllerPublishVolume and ControllerUnpublishVolume calls are written to the state file.
type recordingService struct {
	service.Service
	rec *recorder
}

func (s recordingService) update(change func(*state)) {
	if s.rec.path == "" {
		return
	}
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	change(&s.rec.state)
	if err := s.rec.save(); err != nil {
		klog.Errorf("saving state: %v", err)
	}
}

// ListVolumes reports each volume as published on the nodes it really is published on (the
// mock service itself reports every volume as published on its node, whatever its state, which
// would make the attacher's ListVolumes reconciler force needless re-publishes).
func (s recordingService) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	rsp, err := s.Service.ListVolumes(ctx, req)
	if err != nil {
		return rsp, err
	}
	for _, entry := range rsp.GetEntries() {
		if entry.GetStatus() == nil || entry.GetVolume() == nil {
			continue
		}
		nodes := []string{}
		for key, value := range entry.GetVolume().GetVolumeContext() {
			if node, ok := strings.CutSuffix(key, "/dev"); ok && value != "" {
				nodes = append(nodes, node)
			}
		}
		sort.Strings(nodes)
		entry.Status.PublishedNodeIds = nodes
	}
	return rsp, nil
}

func (s recordingService) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	rsp, err := s.Service.CreateVolume(ctx, req)
	if err == nil {
		s.update(func(st *state) {
			for _, name := range st.Volumes {
				if name == req.Name {
					return
				}
			}
			st.Volumes = append(st.Volumes, req.Name)
		})
	}
	return rsp, err
}

func (s recordingService) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	rsp, err := s.Service.ControllerPublishVolume(ctx, req)
	if err == nil {
		s.update(func(st *state) {
			st.Published[req.VolumeId] = req.NodeId
			st.Readonly[req.VolumeId] = req.Readonly
		})
	}
	return rsp, err
}

func (s recordingService) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	rsp, err := s.Service.ControllerUnpublishVolume(ctx, req)
	if err == nil {
		s.update(func(st *state) {
			delete(st.Published, req.VolumeId)
			delete(st.Readonly, req.VolumeId)
		})
	}
	return rsp, err
}

// restore replays the recorded state into a fresh driver, without going through gRPC.
func restore(svc service.Service, r *recorder) error {
	data, err := os.ReadFile(r.path)
	if errors.Is(err, os.ErrNotExist) {
		return r.save()
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &r.state); err != nil {
		return fmt.Errorf("%s: %w", r.path, err)
	}
	if r.state.Published == nil {
		r.state.Published = map[string]string{}
	}
	if r.state.Readonly == nil {
		r.state.Readonly = map[string]bool{}
	}
	ctx := context.Background()
	mount := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	for _, name := range r.state.Volumes {
		if _, err := svc.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{mount}}); err != nil {
			return fmt.Errorf("restoring volume %q: %w", name, err)
		}
	}
	for id, node := range r.state.Published {
		req := &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: node, VolumeCapability: mount, Readonly: r.state.Readonly[id]}
		if _, err := svc.ControllerPublishVolume(ctx, req); err != nil {
			return fmt.Errorf("restoring publication of %q: %w", id, err)
		}
	}
	klog.Infof("restored %d volumes, %d published, from %s", len(r.state.Volumes), len(r.state.Published), r.path)
	return nil
}

// fault is what --fault-file holds.
type fault struct {
	// Mode is "hang" (the call waits until the fault ends, then is served, or until its caller
	// gives up), "fail" (the call is answered with Code at once, nothing done) or "slow" (the call
	// is served after DelayMs, whatever the caller's deadline).
	Mode string `json:"mode"`
	// UntilMs ends the fault (ms since the epoch).
	UntilMs int64 `json:"untilMs"`
	// Code is the gRPC code name of "fail", e.g. "Unavailable".
	Code string `json:"code,omitempty"`
	// DelayMs is the delay of "slow".
	DelayMs int64 `json:"delayMs,omitempty"`
	// Methods limits the fault to these full method names; empty: both acting calls.
	Methods []string `json:"methods,omitempty"`
}

var faultCodes = map[string]codes.Code{
	"Unavailable": codes.Unavailable, "Internal": codes.Internal, "Aborted": codes.Aborted,
	"ResourceExhausted": codes.ResourceExhausted, "DeadlineExceeded": codes.DeadlineExceeded,
	"Unknown": codes.Unknown,
}

var actingMethods = map[string]bool{
	"/csi.v1.Controller/ControllerPublishVolume":   true,
	"/csi.v1.Controller/ControllerUnpublishVolume": true,
}

// faultFile is the path of --fault-file ("" when none).
var faultFile string

// busyVolumes holds the volumes with an acting call in progress, under --abort-busy-volumes.
var busyVolumes = struct {
	sync.Mutex
	on  bool
	ids map[string]bool
}{ids: map[string]bool{}}

// claimVolume marks the request's volume busy; false when it already was. release undoes it.
func claimVolume(method string, req any) (ok bool, release func()) {
	if !busyVolumes.on || !actingMethods[method] {
		return true, func() {}
	}
	carrier, isVolume := req.(interface{ GetVolumeId() string })
	if !isVolume {
		return true, func() {}
	}
	id := carrier.GetVolumeId()
	busyVolumes.Lock()
	defer busyVolumes.Unlock()
	if busyVolumes.ids[id] {
		return false, nil
	}
	busyVolumes.ids[id] = true
	return true, func() {
		busyVolumes.Lock()
		delete(busyVolumes.ids, id)
		busyVolumes.Unlock()
	}
}

// currentFault reads the fault file; nil when there is none for method now. An unreadable file is
// logged and means no fault.
func currentFault(method string) *fault {
	if faultFile == "" || !actingMethods[method] {
		return nil
	}
	data, err := os.ReadFile(faultFile)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			klog.Errorf("reading fault file: %v", err)
		}
		return nil
	}
	var f fault
	if err := json.Unmarshal(data, &f); err != nil {
		klog.Errorf("fault file %s: %v", faultFile, err)
		return nil
	}
	if time.Now().UnixMilli() >= f.UntilMs {
		return nil
	}
	if len(f.Methods) > 0 {
		found := false
		for _, m := range f.Methods {
			found = found || m == method
		}
		if !found {
			return nil
		}
	}
	return &f
}

// injectFault applies the fault for a call before it is served; a non-nil error answers the call.
func injectFault(ctx context.Context, method string) error {
	f := currentFault(method)
	if f == nil {
		return nil
	}
	switch f.Mode {
	case "fail":
		code, ok := faultCodes[f.Code]
		if !ok {
			code = codes.Unavailable
		}
		return status.Errorf(code, "fault injected: %s", f.Mode)
	case "hang":
		wait := time.Until(time.UnixMilli(f.UntilMs))
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-time.After(wait):
		}
	case "slow":
		time.Sleep(time.Duration(f.DelayMs) * time.Millisecond)
	default:
		klog.Errorf("fault file %s: unknown mode %q", faultFile, f.Mode)
	}
	return nil
}

func main() {
	endpoint := flag.String("endpoint", "", "unix socket path to serve on (an old socket file is removed first)")
	name := flag.String("name", service.Name, "CSI driver name; also the only node ID the driver accepts")
	attachLimit := flag.Int64("attach-limit", 0, "volumes per node; 0 = no limit")
	stateFile := flag.String("state-file", "", "JSON file to keep volumes and publications across restarts")
	flag.StringVar(&faultFile, "fault-file", "", "JSON file describing a fault of the acting controller calls (see fault)")
	flag.BoolVar(&busyVolumes.on, "abort-busy-volumes", false, "answer ABORTED to an acting call for a volume with one in progress")
	klog.InitFlags(nil)
	_ = flag.Set("v", "3")
	flag.Parse()
	path := strings.TrimPrefix(*endpoint, "unix://")
	if path == "" {
		klog.Fatal("--endpoint is required")
	}

	svc := service.New(service.Config{DriverName: *name, AttachLimit: *attachLimit})
	rec := &recorder{path: *stateFile, state: state{Published: map[string]string{}, Readonly: map[string]bool{}}}
	if rec.path != "" {
		if err := restore(svc, rec); err != nil {
			klog.Fatalf("restore: %v", err)
		}
	}

	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		klog.Fatalf("removing old socket: %v", err)
	}
	listener, err := net.Listen("unix", path)
	if err != nil {
		klog.Fatalf("listen: %v", err)
	}
	recording := recordingService{Service: svc, rec: rec}
	server := grpc.NewServer(grpc.UnaryInterceptor(logCall))
	csi.RegisterIdentityServer(server, recording)
	csi.RegisterControllerServer(server, recording)
	csi.RegisterNodeServer(server, recording)
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	klog.Infof("serving CSI driver %q on %s", *name, path)

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case sig := <-signals:
		klog.Infof("%v received, stopping gracefully", sig)
	case err := <-served:
		klog.Fatalf("serve: %v", err)
	}
	stopped := make(chan struct{})
	go func() {
		server.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
		klog.Infof("graceful stop complete")
	case <-time.After(gracePeriod):
		klog.Infof("graceful stop did not complete in %v, stopping", gracePeriod)
		server.Stop()
	}
	klog.Flush()
}

// logCall logs each call in the csi-test driver's format (see the package comment).
func logCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	received := time.Now().UnixMilli()
	var rsp any
	var err error
	if ok, release := claimVolume(info.FullMethod, req); !ok {
		err = status.Errorf(codes.Aborted, "an operation for volume %s is already in progress", req.(interface{ GetVolumeId() string }).GetVolumeId())
	} else {
		err = injectFault(ctx, info.FullMethod)
		if err == nil {
			rsp, err = handler(ctx, req)
		}
		release()
	}
	entry := struct {
		Method     string
		Request    any
		Response   any
		Error      string
		FullError  error
		ReceivedMs int64
	}{Method: info.FullMethod, Request: req, Response: rsp, FullError: err, ReceivedMs: received}
	if err != nil {
		entry.Error = err.Error()
	}
	line, _ := json.Marshal(entry)
	klog.V(3).Infof("gRPCCall: %s\n", line)
	return rsp, err
}
