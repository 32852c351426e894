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
// Every gRPC call is logged by the driver's own interceptor as a line
// `gRPCCall: {"Method":...,"Request":...,"Response":...,"Error":...}` at verbosity 3.
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

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/driver"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

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

func main() {
	endpoint := flag.String("endpoint", "", "unix socket path to serve on (an old socket file is removed first)")
	name := flag.String("name", service.Name, "CSI driver name; also the only node ID the driver accepts")
	attachLimit := flag.Int64("attach-limit", 0, "volumes per node; 0 = no limit")
	stateFile := flag.String("state-file", "", "JSON file to keep volumes and publications across restarts")
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
	csiDriver := driver.NewCSIDriver(&driver.CSIDriverServers{Controller: recording, Identity: recording, Node: recording})
	// nil: the driver's own interceptor, which logs every call as "gRPCCall: {json}".
	if err := csiDriver.Start(listener, nil); err != nil {
		klog.Fatalf("start: %v", err)
	}
	klog.Infof("serving CSI driver %q on %s", *name, path)

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	sig := <-signals
	klog.Infof("%v received, stopping", sig)
	csiDriver.Stop()
	klog.Flush()
}
