// Package upstreamdra is upstream's e2e.test cut down to the DRA tests.
//
// Upstream's test/e2e/e2e_test.go links every e2e area (storage, network,
// apps, ...): about 25 minutes of compiling on two cores. This package links
// only the areas with [DRA] specs and the framework the suite setup needs, and registers the
// same flags, so it runs the same [DRA] specs with the same command line in a
// fraction of the build time. hack/upstream-e2e.sh copies it into its copy of
// hack/k8s's module and builds it with `go test -c`.
package upstreamdra

import (
	"flag"
	"os"
	"testing"

	conformancetestdata "k8s.io/kubernetes/test/conformance/testdata"
	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// The feature constants are frozen on import, as in the full suite.
	_ "k8s.io/kubernetes/test/e2e/feature"

	// The test sources with [DRA] specs: test/e2e/dra, and the
	// ResourceQuota spec for claims in apimachinery.
	_ "k8s.io/kubernetes/test/e2e/apimachinery"
	_ "k8s.io/kubernetes/test/e2e/dra"

	// The framework reconfiguration the full suite imports.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"
)

func TestMain(m *testing.M) {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if flag.CommandLine.NArg() > 0 {
		os.Stderr.WriteString("unexpected arguments; flags only\n")
		os.Exit(2)
	}
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	testfiles.AddFileSource(conformancetestdata.GetConformanceTestdataFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestDRA(t *testing.T) {
	e2e.RunE2ETests(t)
}
