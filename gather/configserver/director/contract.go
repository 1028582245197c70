package director

// The contract between the operator, acting as the director, and the
// embedded config server: a gathering Job's ServiceAccount,
// <dns-label(D)>-gather in the deployment's namespace and managed by
// bosh-injector (the runner creates it), carries the deployment's exact
// name and the absolute names it was granted; its projected token is
// issued for Audience.
const (
	// AnnotationDeployment holds the deployment's BOSH name, unsanitised
	// ("a_b" and "a-b" differ; the ServiceAccount name cannot tell).
	AnnotationDeployment = "config-server.bosh-injector.io/deployment"
	// AnnotationGrants holds a JSON list of absolute credential names
	// (((/x)) references) the deployment may also read and write.
	AnnotationGrants = "config-server.bosh-injector.io/grants"
	// Audience is what gathering Jobs' tokens for the server are issued
	// for.
	Audience = "bosh-injector-config-server"
)

// Modes of the operator's config server.
const (
	// ModeEmbedded is the chart's own server.
	ModeEmbedded = "embedded"
	// ModeExternal is a CredHub (or BOSH config-server) the user runs.
	ModeExternal = "external"
	// ModeSecrets keeps variables in <deployment>.var-<name> Secrets, with
	// no server.
	ModeSecrets = "secrets"
)
