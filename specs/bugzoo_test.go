package specs_test

import (
	"os"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/report"
	"github.com/podsafe/podsafe/specs"
)

// The bug zoo suite: every planted bug, switched on in the real code path,
// must be caught by the checker named for it, with evidence, within its
// attempts. Failpoint bugs need a failpoint build: make test-failpoints and
// make bugzoo run them; an ordinary build runs the others and checks that a
// failpoint bug is refused with a clear error rather than silently inert.
var _ = Describe("bug zoo", Label("bugzoo"), func() {
	for _, bug := range specs.Zoo() {
		labels := append([]string{"bugzoo"}, bug.Guarantees...)
		It(bug.Name+" is caught by "+bug.Checker, Label(labels...), func(ctx SpecContext) {
			if bug.Failpoint != "" && !nemesis.FailpointsCompiled() {
				if os.Getenv("PODSAFE_FAILPOINTS") == "1" {
					Fail("PODSAFE_FAILPOINTS=1 but the failpoint markers are not live: this is not a failpoint build (make test-failpoints builds one)")
				}
				s := bug.Scenario
				s.Bugs = []string{bug.Name}
				s.Defaults()
				Expect(s.Validate()).To(MatchError(ContainSubstring("failpoint")), "a failpoint bug must be refused in an ordinary build")
				Skip("failpoint bug: make test-failpoints or make bugzoo runs it")
			}
			rep, err := specs.RunZoo(ctx, specs.ZooOptions{
				StoreDir: GinkgoT().TempDir(), Bugs: []string{bug.Name},
				Attempts: 3, Budget: 3 * time.Minute, Progress: GinkgoWriter,
			})
			Expect(err).NotTo(HaveOccurred())
			Expect(rep.Catches).To(HaveLen(1))
			c := rep.Catches[0]
			Expect(c.Caught).To(BeTrue(), "%s must be caught by %s; runs said Illegal: %v (last run %s, %s)", bug.Name, bug.Checker, c.CaughtBy, c.Dir, c.Error)
			res, err := readResults(c.Dir)
			Expect(err).NotTo(HaveOccurred())
			i := slices.IndexFunc(res.Checks, func(r checker.Result) bool { return r.Checker == bug.Checker })
			Expect(i).To(BeNumerically(">=", 0))
			Expect(res.Checks[i].Evidence).NotTo(BeEmpty(), "an Illegal verdict carries evidence")
			Expect(res.Checks[i].Guarantees).To(ContainElement(BeElementOf(bug.Guarantees)),
				"the checker that caught %s judges one of the guarantees it breaks", bug.Name)
		}, SpecTimeout(10*time.Minute))
	}
})

func readResults(dir string) (*report.Results, error) { return report.ReadResults(dir) }
