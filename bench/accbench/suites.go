package accbench

// allSuites lists every suite in run order.
func allSuites() []Suite {
	return []Suite{
		devallocSuite(),
		replaySuite(),
		churnInvariantsSuite(),
		hostpinSuite(),
		h2dSuite(),
		progcacheSuite(),
		kernelsSuite(),
		redisSuite(),
		wrlruSuite(),
		graphpassSuite(),
	}
}
