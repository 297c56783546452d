// Package eks logs in to Amazon EKS clusters in process, with no exec plugin:
// the token aws-iam-authenticator and "aws eks get-token" make, minted from
// the AWS SDK's credentials.
//
//	v.OnLogin(eks.Login(eks.Options{
//		Cluster: "prod",
//		Region:  "eu-west-1",
//		Server:  "https://ABCD.gr7.eu-west-1.eks.amazonaws.com",
//		CAData:  caPEM,
//	}), login.Timeout(30*time.Second))
//
// This package is a Go module of its own, so that the library's module never
// depends on the AWS SDK: import it only where EKS is used. The guide
// docs/cloud.md in the repository shows the three clouds' logins side by
// side, with what a kubeconfig from a Secret may do with them.
//
// # The token
//
// An EKS token is an STS GetCallerIdentity request, presigned with SigV4
// (query X-Amz-Expires=60, and the header x-k8s-aws-id: <cluster> among the
// signed headers), written as "k8s-aws-v1." and the base64url (no padding)
// of the presigned URL. The API server's authenticator calls that URL with
// the header and learns who signed it; the signed cluster name keeps a token
// for one cluster from being replayed at another. Making the token is local
// (a signature): no request leaves the process unless credentials must be
// fetched or a role assumed.
//
// STS accepts a presigned URL for 15 minutes after it was signed, whatever
// X-Amz-Expires says, so the credential's Expiration is the signing time plus
// 14 minutes (a minute of margin for clock skew with STS, as
// aws-iam-authenticator and Flux do), or the end of the AWS credentials that
// signed it when that comes first: a URL signed with a session token stops
// working when the session ends. The vault logs in again in the background
// before then.
//
// # Credentials
//
// Without [Options].AWS, credentials come from aws-sdk-go-v2's default chain,
// loaded once per handler and cached by the SDK (handlers of many clusters
// share one cache when given the same [Options].AWS; [Native]'s logins share
// one per region and profile): the environment
// (AWS_ACCESS_KEY_ID), a web identity token file (IRSA:
// AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN), the shared config files, the
// container credentials endpoint (EKS Pod Identity) and IMDS. With
// [Options].RoleARN, that identity first assumes the role (session name
// "authvault") and the role's credentials sign the token; the role is
// assumed again at every login.
//
// # The server
//
// With [Options].Server empty, every login asks EKS DescribeCluster for the
// cluster's endpoint and CA, with the credentials that sign the token (the
// role's, with RoleARN), so the token only goes to the server AWS names for
// the cluster. With Server set, Server and CAData are used as given, and
// nothing checks that they are the cluster's, unless [Options].CheckServer
// is set: then DescribeCluster is asked too, a Server that is not the
// cluster's endpoint (https, same host, port 443, no path) is a permanent
// error before any token is made, and the CA is the cluster's. Set it when
// someone else chose Server (a kubeconfig from a Secret): a token is a
// credential for the cluster wherever it is sent.
//
// # Federation: a member with no stored credential
//
// [Federated] is the provider of package federation for an EKS member: the
// hub mints a token for one of its ServiceAccounts with the audience
// [FederatedAudience] ("sts.amazonaws.com"), and each login exchanges it at STS
// (AssumeRoleWithWebIdentity, through the SDK's stscreds) for the session of
// [FederatedOptions].RoleARN, assumes ChainRoleARN with that session when
// set, and gives the EKS token that session signs, for the member's server
// and CA. No AWS credential of this process is used, or needed.
//
//	v.OnLogin(federation.Login(federation.Config{
//		Hub:       hub, // the hub's own vault's config
//		Namespace: "fleet-system", ServiceAccount: "fleet-operator",
//		Audiences: []string{eks.FederatedAudience},
//		Member:    federation.Member{Server: "https://ABCD.gr7.eu-west-1.eks.amazonaws.com", CAData: caPEM},
//		Provider: eks.Federated(eks.FederatedOptions{
//			Cluster: "prod", Region: "eu-west-1",
//			RoleARN: "arn:aws:iam::111122223333:role/fleet-prod",
//		}),
//	}))
//
// What STS trusts is the account's: an IAM OIDC identity provider for the
// hub's ServiceAccount issuer, with the audience among its client IDs (STS
// fetches the issuer's discovery document and keys, which the hub must
// serve where STS can reach them), and a role whose trust policy lets that
// provider's tokens assume it, on conditions on the token's audience and
// subject (system:serviceaccount:<namespace>:<name>). A role per member
// keeps each member's access apart. The cluster maps the session's role to
// a user (an EKS access entry, or aws-auth). A token STS refuses (invalid,
// expired, an issuer or audience it does not trust, a subject the role does
// not allow) is an error that wraps federation.ErrRejected and quotes STS's
// code; a refusal of ChainRoleARN, an STS that does not answer or answers
// 5xx, are errors the vault retries. The credential expires when the first
// of the EKS token and the sessions that signed it does.
//
// # Errors
//
// Every error starts with "eks:", names the cluster and where the
// credentials came from (for example: eks: cluster "prod": credentials from
// web identity (AWS_ROLE_ARN=arn:aws:iam::111122223333:role/op): …) and
// never holds a secret: no secret access key, session token, presigned URL
// or token, and no URL user info. An Options that cannot work (no cluster,
// server or region) is a permanent error; the rest are retried by the vault.
// Logs go to the logger in the handler's context (logr.FromContext), at
// V(1), with the same care. So do the AWS SDK's own lines, for the
// configurations the handlers load (not an [Options].AWS of yours, which
// keeps its logger): a WARN at INFO ("AWS SDK warning", such as IMDS's
// "falling back to IMDSv1"), the rest at V(1); the SDK's default logger
// would write them to stderr.
package eks
