package names

// ImageLabelSkippedPackages is the release image label listing, comma
// separated, the packages release-image --manifest did not compile because
// no job of the deployment needs them (as a director compiles only what
// the deployment's jobs depend on). Absent when every package is compiled.
const ImageLabelSkippedPackages = Prefix + "skipped-packages"
