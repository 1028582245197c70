// Package credhub holds CredHub's vocabulary as its clients (the BOSH
// director, the credhub CLI) see it: the error texts of
// cloudfoundry/credhub's ErrorMessages.kt, word for word, and the JSON shapes
// of its requests and responses. The server's other packages take them from
// here so that every answer reads as CredHub's.
package credhub

import "strings"

// Error texts of ErrorMessages.kt, with MessageFormat's quoting (”) undone.
const (
	ResourceNotFound          = "The request could not be completed because the credential does not exist or you do not have sufficient authorization."
	CANotFound                = "The request could not be completed because the CA does not exist or you do not have sufficient authorization."
	TypeMismatch              = "The credential type cannot be modified. Please delete the credential if you wish to create it with a different type."
	BadRequest                = "The request could not be fulfilled because the request path or body did not meet expectation. Please check the documentation for required formatting and retry your request."
	CAAndSelfSign             = "The parameters 'ca' and 'self-sign' cannot be used in combination. Please update and retry your request."
	CAMissingPrivateKey       = "The specified CA object does not have an associated private key."
	CannotGenerateType        = "Credentials of this type cannot be generated. Please adjust the credential type and retry your request."
	CannotRegenerateCert      = "The credential could not be regenerated because the certificate was statically set and is not self-signed or is invalid."
	CannotRegeneratePassword  = "The password could not be regenerated because the value was statically set. Only generated passwords may be regenerated."
	CannotRegenerateUser      = "The user could not be regenerated because the value was statically set. Only generated users may be regenerated."
	CantUseVersionsAndCurrent = "The query parameters current and versions cannot be provided in the same request."
	CertNotCA                 = "The requested certificate cannot be signed by the given CA because the given CA is not a certificate authority. A certificate must contain the extension 'Certificate Authority: YES' to be used to sign other certificates."
	ExcludesAllCharsets       = "The combination of parameters in the request is not allowed. Please validate your input and retry your request."
	InternalServerError       = "An application error occurred. Please contact your CredHub administrator."
	InvalidAlternateName      = "A provided alternative name is not a valid hostname or IP address. Please update this value and retry your request."
	InvalidCertificateValue   = "The provided certificate value is not a valid X509 certificate."
	InvalidDuration           = "Invalid duration specified. The supported duration values are whole numbers between 1-3650."
	invalidExtendedKeyUsage   = "The provided extended key usage '{0}' is not supported. Valid values include 'client_auth', 'server_auth', 'code_signing', 'email_protection' and 'timestamping'."
	invalidJSONKey            = "The request includes an unrecognized parameter '{0}'. Please update or remove this parameter and retry your request."
	InvalidKeyLength          = "The provided key length is not supported. Valid values include '2048', '3072' and '4096'."
	invalidKeyUsage           = "The provided key usage '{0}' is not supported. Valid values include 'digital_signature', 'non_repudiation', 'key_encipherment', 'data_encipherment', 'key_agreement', 'key_cert_sign', 'crl_sign', 'encipher_only' and 'decipher_only'."
	InvalidMode               = "The request does not include a valid mode. Valid values for generate include 'overwrite', 'no-overwrite' and 'converge'."
	invalidQueryParameter     = "The query parameter {0} was not valid for this request."
	InvalidTypeGenerate       = "The request does not include a valid type. Valid values for generate include 'password', 'user', 'certificate', 'ssh' and 'rsa'."
	InvalidTypeRegenerate     = "The request does not include a valid type. Valid values for regenerate include 'password', 'user', 'certificate', 'ssh' and 'rsa'."
	NoCertificateParameters   = "This request must include a value for 'parameters'."
	InvalidTypeSet            = "The request does not include a valid type. Valid values include 'value', 'json', 'password', 'user', 'certificate', 'ssh' and 'rsa'."
	MalformedPrivateKey       = "Private key is malformed."
	MalformedToken            = "The request token is malformed. Please validate that your request token was issued by the UAA server authorized by CredHub."
	InvalidTokenSignature     = "The request token signature could not be verified. Please validate that your request token was issued by the UAA server authorized by CredHub."
	MissingCertificateParams  = "At least one subject value, such as common name or organization, must be defined to generate the certificate. Please update and retry your request."
	MissingName               = "A credential name must be provided. Please validate your input and retry your request."
	MissingPassword           = "A password value must be specified for the credential. Please validate and retry your request."
	missingQueryParameter     = "The query parameter {0} is required for this request."
	MissingRSASSHParameters   = "At least one key value must be set. Please validate your input and retry your request."
	MissingSignedBy           = "You must specify a signing CA. Please update and retry your request."
	MissingSigningCA          = "You must specify a signing CA or indicate self-signing when generating a certificate. Please update and retry your request."
	MissingValue              = "A non-empty value must be specified for the credential. Please validate and retry your request."
	MissingCertificateCreds   = "At least one certificate attribute must be set. Please validate your input and retry your request."
	NameTooLong               = "The request could not be completed. The credential name cannot exceed 1024 characters"
	MetadataTooLong           = "The request could not be completed. The credential metadata cannot exceed 7000 characters"
	NotACAName                = "The name given for the CA does not reference a CA type credential."
	OverwriteAndModeBoth      = "The parameters overwrite and mode cannot be combined. Please update and retry your request."
	InvalidCharacterInName    = "Credential names may only include alpha, numeric, hyphen, underscore, and forward-slash characters. Please update and retry your request."
	InvalidSlashInName        = "A credential name cannot end with a '/' character or contain '//'. Credential names should be in the form of /[path]/[name] or [path]/[name]. Please update and retry your request."
	invalidCertificateParam   = "The request could not be completed because the {0} is too long. The max length for {0} is {1} characters."
	ExceedsMaximumSize        = "Value exceeds the maximum size."
	TooManyTransitional       = "The maximum number of transitional versions for a given CA is 1."
	CannotDeleteLastVersion   = "The minimum number of versions for a Certificate is 1."
	VersionMismatch           = "The request could not be completed because the specified version does not exist or does not belong to the specified credential."
)

// InvalidExtendedKeyUsage is INVALID_EXTENDED_KEY_USAGE for usage.
func InvalidExtendedKeyUsage(usage string) string { return format(invalidExtendedKeyUsage, usage) }

// InvalidKeyUsage is INVALID_KEY_USAGE for usage.
func InvalidKeyUsage(usage string) string { return format(invalidKeyUsage, usage) }

// InvalidJSONKey is INVALID_JSON_KEY for an unknown request field.
func InvalidJSONKey(key string) string { return format(invalidJSONKey, key) }

// InvalidQueryParameter is INVALID_QUERY_PARAMETER for a parameter.
func InvalidQueryParameter(name string) string { return format(invalidQueryParameter, name) }

// MissingQueryParameter is MISSING_QUERY_PARAMETER for a parameter.
func MissingQueryParameter(name string) string { return format(missingQueryParameter, name) }

// InvalidCertificateParameter is INVALID_CERTIFICATE_PARAMETER.
func InvalidCertificateParameter(what, max string) string {
	return format(invalidCertificateParam, what, max)
}

func format(msg string, args ...string) string {
	for i, a := range args {
		msg = strings.ReplaceAll(msg, "{"+string(rune('0'+i))+"}", a)
	}
	return msg
}

// Invalid is a request CredHub rejects with 400 and Message.
type Invalid struct{ Message string }

func (e *Invalid) Error() string { return e.Message }

// Reject is a 400 answer with a CredHub message.
func Reject(message string) error { return &Invalid{Message: message} }
