package cells

// RunCell is runCell, for the suites' test (package cells_test, which
// links the built-in suites, as this package's own tests cannot).
var RunCell = runCell
