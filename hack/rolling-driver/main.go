// Command rolling-driver is a small DRA kubelet plugin shaped like the
// drivers vendors ship: it is built on the kubeletplugin helper of
// k8s.io/dynamic-resource-allocation, always starts with
// kubeletplugin.RollingUpdate(<its pod's UID>) and reads every setting from
// environment variables. Its DaemonSet (deploy/rolling-driver/) updates with
// maxSurge 1 and maxUnavailable 0, so during an update an old and a new pod
// serve the same node side by side, each with its own
// <driver>-<pod UID>-reg.sock and dra-<pod UID>.sock.
//
// dra-e2e uses it to check that the runner (its interposer in particular)
// copes with such sockets, and as a second real driver for the conformance
// pack (profiles/rolling-driver.yaml). hack/build-rolling-driver.sh builds it
// at the control plane's Kubernetes version.
//
// What it does:
//   - publishes one pool, named after the node, of NUM_DEVICES plain devices
//     device-0 … device-N-1, DEVICES_PER_SLICE of them per node-local
//     ResourceSlice (default: all in one slice; its DaemonSet sets 1, so
//     the pool has several slices and the helper's ResourceSlice
//     controller must keep them consistent, bumping the pool's generation
//     when the device count changes);
//   - prepares a claim by writing one CDI spec file for it into CDI_ROOT and
//     returning one CDI device per allocated device;
//   - unprepares a claim by removing that file;
//   - stops the helper on SIGTERM (which removes its sockets) and exits 0.
//
// Three settings make it a broken driver on purpose, each standing for a
// bug class of published drivers (docs/driver-mutants.md):
//
// DELETE_SLICES_ON_STOP=true stands for drivers that "clean up" on SIGTERM,
// for the conformance pack's check that a surging rollout never leaves a
// node without devices (features/conformance/updates.feature): it deletes
// the node's ResourceSlices of the driver when it stops. During a surge
// rollout the old pod stops after the new one is ready and deletes the
// slices the new one serves; the new pod's helper does not publish them
// again by itself (a run on 2026-12-06 still saw none seconds later), so
// the node offers no device until the driver restarts.
// tests/real/driver_updates.rs deploys it so and expects the scenario to
// fail.
//
// POOL_GENERATION=kept (default bumped) stands for a vendor's hand-written
// publisher that never bumps its pool's generation when its devices
// change: instead of handing its pool to the helper (PublishResources), the
// driver writes its node's slices itself once at start, with the highest
// generation it finds: it updates the slices it finds in place with the new
// devices and resourceSliceCount, creates missing ones and deletes surplus
// ones last. While it does, slices of one generation disagree on the
// pool's resourceSliceCount, or outnumber it, and a device may be in two
// of them: the scheduler, which trusts the newest generation to be one
// consistent pool, sees an invalid one. Restarting it with one device
// fewer (the pack's @DeviceCount scenario) shows it.
//
// LEFTOVER_SLICES=true stands for drivers that leave slices behind when
// uninstalled: besides its pool it publishes a second one, <node>-network
// with one device network-0, in a slice without spec.nodeName (its
// spec.nodeSelector selects its node by metadata.name), and never deletes
// it. The kubelet wipes only a driver's slices with spec.nodeName of its
// node once the driver is gone, so that slice stays after the DaemonSet is
// deleted, offering a device nobody serves.
//
// It keeps no state between calls: with rolling updates the kubelet may
// prepare a claim through one pod and unprepare it through the other, and
// after a node reboot the CDI directory (a tmpfs) is empty while the kubelet
// still asks to prepare. Everything a call needs comes from the claim or
// from its UID.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

// The CDI spec version written. Environment variables alone would do with
// 0.3.0, but CDI device names start with the claim UID, which may start
// with a digit, and such names need 0.5.0: a runtime rejects the whole
// spec file of an older version ("the spec version must be at least
// v0.5.0") and the container fails with an unresolvable CDI device, for
// about half of all claims. containerd 2.x and CRI-O read 0.5.0.
const cdiVersion = "0.5.0"

// A ResourceSlice holds at most this many devices (resource.k8s.io/v1). The
// driver offers no more than fit into one slice, however it splits them.
const maxDevicesPerSlice = 128

// config is everything the driver is told, from its environment only: that
// is how charts of helper-based drivers configure them, and the runner
// changes NUM_DEVICES (and, behind its interposer,
// KUBELET_REGISTRAR_DIRECTORY_PATH) in the DaemonSet's env.
type config struct {
	driverName   string
	nodeName     string
	podUID       types.UID
	numDevices   int
	cdiRoot      string
	registrarDir string
	pluginsDir   string
	// How many devices go into one slice of the pool (1 to
	// maxDevicesPerSlice); DEVICES_PER_SLICE, default all in one.
	devicesPerSlice int
	// The broken variants (see the package comment): delete the node's
	// slices when stopping; publish the pool without the helper, never
	// bumping its generation; publish a slice without spec.nodeName that
	// nothing ever deletes.
	deleteSlicesOnStop bool
	keepPoolGeneration bool
	leftoverSlices     bool
}

func configFromEnv() (config, error) {
	get := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	c := config{
		driverName:   get("DRIVER_NAME", "rolling.dra-e2e.k8s.io"),
		nodeName:     os.Getenv("NODE_NAME"),
		podUID:       types.UID(os.Getenv("POD_UID")),
		cdiRoot:      get("CDI_ROOT", "/var/run/cdi"),
		registrarDir: get("KUBELET_REGISTRAR_DIRECTORY_PATH", kubeletplugin.KubeletRegistryDir),
		pluginsDir:   get("KUBELET_PLUGINS_DIRECTORY_PATH", kubeletplugin.KubeletPluginsDir),
	}
	// Both are required rather than defaulted: without the node name the
	// slice would belong to no node, and without the pod UID two pods of a
	// surge update would fight over one pair of socket names.
	if c.nodeName == "" {
		return c, errors.New("NODE_NAME must be set (downward API: spec.nodeName)")
	}
	if c.podUID == "" {
		return c, errors.New("POD_UID must be set (downward API: metadata.uid)")
	}
	n, err := strconv.Atoi(get("NUM_DEVICES", "4"))
	if err != nil || n < 0 || n > maxDevicesPerSlice {
		return c, fmt.Errorf("NUM_DEVICES=%q: want a whole number from 0 to %d", os.Getenv("NUM_DEVICES"), maxDevicesPerSlice)
	}
	c.numDevices = n
	perSlice, err := strconv.Atoi(get("DEVICES_PER_SLICE", strconv.Itoa(maxDevicesPerSlice)))
	if err != nil || perSlice < 1 || perSlice > maxDevicesPerSlice {
		return c, fmt.Errorf("DEVICES_PER_SLICE=%q: want a whole number from 1 to %d (unset: all devices in one slice)", os.Getenv("DEVICES_PER_SLICE"), maxDevicesPerSlice)
	}
	c.devicesPerSlice = perSlice
	if c.deleteSlicesOnStop, err = boolFromEnv("DELETE_SLICES_ON_STOP"); err != nil {
		return c, err
	}
	switch v := os.Getenv("POOL_GENERATION"); v {
	case "", "bumped":
	case "kept":
		c.keepPoolGeneration = true
	default:
		return c, fmt.Errorf("POOL_GENERATION=%q: want bumped (the helper publishes the pool) or kept (the driver writes its slices itself and never bumps the generation)", v)
	}
	if c.leftoverSlices, err = boolFromEnv("LEFTOVER_SLICES"); err != nil {
		return c, err
	}
	return c, nil
}

// boolFromEnv reads a switch that is off unless set to true.
func boolFromEnv(name string) (bool, error) {
	switch v := os.Getenv(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
}

// driver implements kubeletplugin.DRAPlugin.
type driver struct {
	cfg config
	// fatal ends the process: called for background errors the helper
	// says cannot be retried.
	fatal func(error)
}

var _ kubeletplugin.DRAPlugin = &driver{}

// cdiSpec and its parts are the subset of the CDI spec format the driver
// writes; its own types keep the CDI library (and its dependencies) out of
// the build.
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name           string            `json:"name"`
	ContainerEdits cdiContainerEdits `json:"containerEdits"`
}

type cdiContainerEdits struct {
	Env []string `json:"env,omitempty"`
}

// The CDI kind: the driver name as vendor, one class for all its devices.
func (d *driver) cdiKind() string { return d.cfg.driverName + "/device" }

// One spec file per claim, named by its UID, so that unprepare (which gets
// no more than the UID) finds it and two claims never share a file.
func (d *driver) specPath(claimUID types.UID) string {
	return filepath.Join(d.cfg.cdiRoot, fmt.Sprintf("%s-%s.json", d.cfg.driverName, claimUID))
}

var notAlnum = regexp.MustCompile(`[^a-zA-Z0-9]`)

// envName makes a valid variable name out of names that may hold `-` or
// `.`: upstream's test driver does the same to claim_<claim>_<request>, so
// a profile's `claim_*=true` finds either driver's variables.
func envName(s string) string { return notAlnum.ReplaceAllString(s, "_") }

// PrepareResourceClaims writes each claim's CDI spec, then answers with its
// devices. It computes everything from the claim, so a repeated call (after
// a kubelet restart, through the other pod of a rolling update, after a
// reboot emptied CDI_ROOT) writes the spec again and returns the same answer.
func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, err := d.prepareClaim(claim)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Preparing claim failed", "claim", klog.KObj(claim), "uid", claim.UID)
			result[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		names := make([]string, 0, len(devices))
		for _, dev := range devices {
			names = append(names, dev.DeviceName)
		}
		klog.FromContext(ctx).Info("Prepared claim", "claim", klog.KObj(claim), "uid", claim.UID, "devices", names)
		result[claim.UID] = kubeletplugin.PrepareResult{Devices: devices}
	}
	return result, nil
}

func (d *driver) prepareClaim(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	// The helper passes only allocated claims; checked again so that a
	// change there cannot turn into a nil dereference here.
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	spec := cdiSpec{Version: cdiVersion, Kind: d.cdiKind()}
	var devices []kubeletplugin.Device
	for _, r := range claim.Status.Allocation.Devices.Results {
		// A claim may hold devices of several drivers; the others are
		// prepared by their own plugins.
		if r.Driver != d.cfg.driverName {
			continue
		}
		// A request's subrequest (`req/sub`) is not part of the variable:
		// a container refers to the request.
		request := resourceclaim.BaseRequestRef(r.Request)
		// The claim UID makes the CDI name unique over time too, so a
		// runtime's cached spec of an earlier claim never answers for it.
		name := string(claim.UID) + "-" + r.Device
		spec.Devices = append(spec.Devices, cdiDevice{
			Name: name,
			ContainerEdits: cdiContainerEdits{Env: []string{
				envName("claim_"+claim.Name+"_"+request) + "=true",
				"ROLLING_DEVICE_" + envName(r.Device) + "=" + r.Device,
			}},
		})
		devices = append(devices, kubeletplugin.Device{
			Requests:     []string{r.Request},
			PoolName:     r.Pool,
			DeviceName:   r.Device,
			CDIDeviceIDs: []string{d.cdiKind() + "=" + name},
			ShareID:      r.ShareID,
		})
	}
	if len(spec.Devices) == 0 {
		// CDI rejects a spec without devices; nothing of this driver's
		// is in the claim, so nothing is injected. A file left from an
		// earlier allocation with the same UID cannot exist, but removing
		// it costs nothing.
		return nil, removeIfExists(d.specPath(claim.UID))
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode CDI spec: %w", err)
	}
	if err := writeAtomically(d.specPath(claim.UID), data); err != nil {
		return nil, fmt.Errorf("write CDI spec: %w", err)
	}
	return devices, nil
}

// writeAtomically replaces path with data so that a runtime reading the CDI
// directory sees the old file or the new one, never half of one: a temporary
// file in the same directory (a dot name without .json, which CDI ignores),
// flushed, then renamed over path.
func writeAtomically(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	// Removing after a successful rename fails harmlessly.
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// CreateTemp makes the file 0600; runtimes read specs as root anyway,
	// but other tools on the node may not.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// UnprepareResourceClaims removes each claim's spec file. A claim with no
// file (never prepared here, unprepared already, or a reboot emptied the
// directory) is done as well: the kubelet repeats unprepares too.
func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		err := removeIfExists(d.specPath(claim.UID))
		if err != nil {
			klog.FromContext(ctx).Error(err, "Unpreparing claim failed", "claim", claim.NamespacedName, "uid", claim.UID)
		} else {
			klog.FromContext(ctx).Info("Unprepared claim", "claim", claim.NamespacedName, "uid", claim.UID)
		}
		result[claim.UID] = err
	}
	return result, nil
}

// HandleError logs background errors (publishing slices, the gRPC
// servers). Those the helper does not mark recoverable end the process, so
// the DaemonSet restarts it rather than leaving it half-working.
func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.fatal(fmt.Errorf("%s: %w", msg, err))
	}
}

// WatchHealthStatus is part of the helper's interface. The driver reports
// no device health (and turns the service off with HealthService(false), so
// the kubelet is never told about it); the sentinel error is the documented
// answer should it be called anyway.
func (d *driver) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

// resources is the one pool the driver publishes: named after the node, as
// node-local pools usually are, with plain devices (no attributes, counters
// or capacity) that any claim of the DeviceClass may get, devicesPerSlice
// to a slice in order (device-0 in the first). Without devices it is one
// empty slice, which says the node has none.
func (d *driver) resources() resourceslice.DriverResources {
	slices := []resourceslice.Slice{{}}
	for i := 0; i < d.cfg.numDevices; i++ {
		last := &slices[len(slices)-1]
		if len(last.Devices) == d.cfg.devicesPerSlice {
			slices = append(slices, resourceslice.Slice{})
			last = &slices[len(slices)-1]
		}
		last.Devices = append(last.Devices, resourceapi.Device{Name: fmt.Sprintf("device-%d", i)})
	}
	return resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{
			d.cfg.nodeName: {Slices: slices},
		},
	}
}

// errStopped is the cancellation cause of a SIGTERM or SIGINT: an orderly
// stop, exit status 0.
var errStopped = errors.New("stopped by a signal")

func run() error {
	cfg, err := configFromEnv()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)

	// The kubelet sends SIGTERM when the pod is deleted (also when a surge
	// update replaces it). Stopping the helper then removes both sockets;
	// the next pod cannot remove sockets named after another pod's UID, and
	// stale ones would keep the kubelet trying to reach this one.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-signals
		klog.InfoS("Stopping", "signal", s.String())
		cancel(errStopped)
	}()

	restConfig, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("in-cluster config: %w", err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}

	// The helper wants both directories to exist. The DaemonSet mounts
	// them, but when run by hand the driver makes its own.
	pluginDataDir := filepath.Join(cfg.pluginsDir, cfg.driverName)
	for _, dir := range []string{cfg.cdiRoot, pluginDataDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}

	d := &driver{cfg: cfg, fatal: func(err error) { cancel(err) }}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(cfg.driverName),
		kubeletplugin.NodeName(cfg.nodeName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(cfg.registrarDir),
		kubeletplugin.PluginDataDirectoryPath(pluginDataDir),
		// The point of this driver: socket names carry the pod UID, and
		// prepare/unprepare are serialized across both pods of an
		// update through a lock file in the plugin data directory.
		kubeletplugin.RollingUpdate(cfg.podUID),
		kubeletplugin.HealthService(false),
	)
	if err != nil {
		return fmt.Errorf("start kubelet plugin: %w", err)
	}
	// Stop waits until the sockets are gone, before the process exits.
	defer helper.Stop()
	klog.InfoS("Started", "driver", cfg.driverName, "node", cfg.nodeName, "podUID", cfg.podUID,
		"devices", cfg.numDevices, "devicesPerSlice", cfg.devicesPerSlice, "registrarDir", cfg.registrarDir,
		"pluginDataDir", pluginDataDir, "cdiRoot", cfg.cdiRoot, "deleteSlicesOnStop", cfg.deleteSlicesOnStop,
		"keepPoolGeneration", cfg.keepPoolGeneration, "leftoverSlices", cfg.leftoverSlices)

	resources := d.resources()
	if cfg.keepPoolGeneration {
		err := retry(ctx, "writing the pool's slices keeping its generation (POOL_GENERATION=kept)", func() error {
			return writePoolKeepingGeneration(ctx, cfg, client, resources.Pools[cfg.nodeName])
		})
		if err != nil {
			return err
		}
	} else if err := helper.PublishResources(ctx, resources); err != nil {
		return fmt.Errorf("publish ResourceSlice: %w", err)
	}
	if cfg.leftoverSlices {
		err := retry(ctx, "publishing the slice without a node name (LEFTOVER_SLICES)", func() error {
			return publishLeftoverSlice(ctx, cfg, client)
		})
		if err != nil {
			return err
		}
	}

	// Ready once the kubelet said it registered this instance: a surge
	// rollout removes the old pod only when the new one is ready, so the
	// two overlap for the kubelet as they do for vendors' drivers, whose
	// readiness checks their registration too.
	mark := readyMark(cfg)
	defer os.Remove(mark)
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if s := helper.RegistrationStatus(); s != nil && s.PluginRegistered {
				if err := os.WriteFile(mark, nil, 0o644); err != nil {
					klog.ErrorS(err, "Writing the readiness mark", "path", mark)
				}
				return
			}
		}
	}()

	<-ctx.Done()
	if cfg.deleteSlicesOnStop && errors.Is(context.Cause(ctx), errStopped) {
		// The helper first, so its slice controller does not publish
		// them again (a second Stop, deferred, returns at once).
		helper.Stop()
		deleteOwnSlices(cfg, client)
	}
	if cause := context.Cause(ctx); !errors.Is(cause, errStopped) {
		return cause
	}
	return nil
}

// deleteOwnSlices is the broken variant's bug (DELETE_SLICES_ON_STOP): it
// deletes every ResourceSlice of the driver on this node, although another
// pod of the driver (the new one of a surge update) still serves the node.
func deleteOwnSlices(cfg config, client kubernetes.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + cfg.nodeName + ",spec.driver=" + cfg.driverName,
	})
	if err != nil {
		klog.ErrorS(err, "Listing the node's ResourceSlices to delete them")
		return
	}
	for _, s := range slices.Items {
		err := client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{})
		klog.InfoS("Deleted ResourceSlice on stop (DELETE_SLICES_ON_STOP)", "slice", s.Name, "err", err)
	}
}

// retry calls f until it succeeds or ctx ends (then returning the cause),
// logging each failure and waiting a second before the next try: what the
// variants that write slices themselves do where the helper's controller
// would retry.
func retry(ctx context.Context, what string, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		klog.ErrorS(err, "Trying again", "what", what)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (stopped before it succeeded)", what, context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
}

// writePoolKeepingGeneration is the POOL_GENERATION=kept variant's bug: a
// hand-written publisher of the node's pool that never bumps the pool's
// generation. It lists the node's slices of the driver, keeps the highest
// generation among those of the pool (1 when there are none), updates the
// existing slices in place (in name order) with the new devices and
// resourceSliceCount, creates the missing ones, and deletes the surplus ones
// last. Each write is correct by itself; between them the newest
// generation is no consistent pool. A conflict with another writer fails
// the whole pass, which retry starts again from a new listing.
func writePoolKeepingGeneration(ctx context.Context, cfg config, client kubernetes.Interface, pool resourceslice.Pool) error {
	api := client.ResourceV1().ResourceSlices()
	list, err := api.List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + cfg.nodeName + ",spec.driver=" + cfg.driverName,
	})
	if err != nil {
		return fmt.Errorf("list the node's ResourceSlices: %w", err)
	}
	var existing []resourceapi.ResourceSlice
	generation := int64(1)
	for _, s := range list.Items {
		if s.Spec.Pool.Name != cfg.nodeName {
			continue
		}
		existing = append(existing, s)
		generation = max(generation, s.Spec.Pool.Generation)
	}
	sort.Slice(existing, func(i, j int) bool { return existing[i].Name < existing[j].Name })
	desired := resourceapi.ResourcePool{
		Name:               cfg.nodeName,
		Generation:         generation,
		ResourceSliceCount: int64(len(pool.Slices)),
	}
	// Owned by the node, as the helper's slices are, so that deleting
	// the node removes them.
	node, err := client.CoreV1().Nodes().Get(ctx, cfg.nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", cfg.nodeName, err)
	}
	for i, want := range pool.Slices {
		if i < len(existing) {
			s := existing[i].DeepCopy()
			s.Spec.Pool = desired
			s.Spec.Devices = want.Devices
			if _, err := api.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update ResourceSlice %s: %w", s.Name, err)
			}
			klog.InfoS("Updated ResourceSlice keeping the pool's generation", "slice", s.Name, "generation", generation,
				"resourceSliceCount", desired.ResourceSliceCount, "devices", len(want.Devices))
			continue
		}
		s := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{
				GenerateName: cfg.nodeName + "-" + cfg.driverName + "-",
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1",
					Kind:       "Node",
					Name:       node.Name,
					UID:        node.UID,
					Controller: ptrTo(true),
				}},
			},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   cfg.driverName,
				Pool:     desired,
				NodeName: ptrTo(cfg.nodeName),
				Devices:  want.Devices,
			},
		}
		created, err := api.Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create a ResourceSlice: %w", err)
		}
		klog.InfoS("Created ResourceSlice keeping the pool's generation", "slice", created.Name, "generation", generation,
			"resourceSliceCount", desired.ResourceSliceCount, "devices", len(want.Devices))
	}
	for _, s := range existing[min(len(existing), len(pool.Slices)):] {
		err := api.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ResourceSlice %s: %w", s.Name, err)
		}
		klog.InfoS("Deleted surplus ResourceSlice", "slice", s.Name)
	}
	return nil
}

// publishLeftoverSlice is the LEFTOVER_SLICES variant's bug: a second pool,
// <node>-network with one device, in a slice that selects the node by
// spec.nodeSelector instead of naming it in spec.nodeName and that nothing
// deletes. The kubelet wipes only slices with the node's spec.nodeName,
// so this one outlives the driver. Its name is fixed, so a second pod of
// the driver (a surge update) finds it there and leaves it.
func publishLeftoverSlice(ctx context.Context, cfg config, client kubernetes.Interface) error {
	pool := cfg.nodeName + "-network"
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: pool + "-" + cfg.driverName},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: cfg.driverName,
			Pool:   resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{
					Key:      "metadata.name",
					Operator: corev1.NodeSelectorOpIn,
					Values:   []string{cfg.nodeName},
				}},
			}}},
			Devices: []resourceapi.Device{{Name: "network-0"}},
		},
	}
	_, err := client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		klog.InfoS("ResourceSlice without a node name is there already (LEFTOVER_SLICES)", "slice", s.Name)
	case err != nil:
		return fmt.Errorf("create ResourceSlice %s: %w", s.Name, err)
	default:
		klog.InfoS("Created ResourceSlice without a node name, never to be deleted (LEFTOVER_SLICES)", "slice", s.Name, "pool", pool)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// readyMark is the file whose existence says the kubelet registered the
// instance of this pod (in the driver's plugin data directory, which the
// DaemonSet mounts).
func readyMark(cfg config) string {
	return filepath.Join(cfg.pluginsDir, cfg.driverName, "ready-"+string(cfg.podUID))
}

func main() {
	// `rolling-driver ready`: the pod's readiness probe (the image has no
	// shell to test for the file).
	if len(os.Args) == 2 && os.Args[1] == "ready" {
		cfg, err := configFromEnv()
		if err == nil {
			_, err = os.Stat(readyMark(cfg))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "not ready:", err)
			os.Exit(1)
		}
		return
	}
	err := run()
	if err != nil {
		klog.ErrorS(err, "rolling-driver failed")
	}
	klog.Flush()
	if err != nil {
		os.Exit(1)
	}
}
