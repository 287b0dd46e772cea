import APNsHTTP2
import ArgumentParser
import Foundation
import PushgateCore

/// A start-up problem with a file or credential (exit status 78, EX_CONFIG): one line naming the
/// flag and what is wrong. Never includes key material.
struct ConfigurationError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Credentials and endpoint, loaded and checked.
struct LoadedCredentials {
    var endpoint: APNsClient.Endpoint
    var authentication: APNsClient.Authentication
    var trustRoots: APNsClient.TrustRoots
    /// The certificate subject's UID (Apple puts the bundle id there), for certificate auth.
    var defaultTopic: String?
}

/// The sources of credentials shared by `send` and the gateway, whatever the flags are called.
struct CredentialSources {
    var certificatePath: String?
    var keyPath: String?
    var authKeyPath: String?
    var keyID: String?
    var teamID: String?
    var sandbox: Bool
    var alternativePort: Bool
    var apnsHost: String?
    var caPath: String?
    /// Names of the flags, for error messages.
    var certificateFlag = "--cert"
    var keyFlag = "--key"

    func load(clock: any WallClock = SystemWallClock()) throws -> LoadedCredentials {
        let endpoint: APNsClient.Endpoint
        if let apnsHost {
            do { endpoint = try APNsClient.Endpoint(parsing: apnsHost) } catch {
                throw ConfigurationError("--apns-host: \(error.message)")
            }
        } else {
            endpoint = .apple(sandbox ? .sandbox : .production, alternativePort: alternativePort)
        }
        let trustRoots: APNsClient.TrustRoots
        if let caPath {
            guard FileManager.default.isReadableFile(atPath: caPath) else {
                throw ConfigurationError("--ca: cannot read \(caPath)")
            }
            trustRoots = .caFile(caPath)
        } else {
            trustRoots = .system
        }
        if let authKeyPath {
            guard let keyID, let teamID else { throw ConfigurationError("--auth-key needs --key-id and --team-id") }
            let signer: ProviderTokenSigner
            do {
                signer = try ProviderTokenSigner(contentsOfFile: authKeyPath, keyID: keyID, teamID: teamID)
            } catch {
                throw ConfigurationError("--auth-key: \(error)")
            }
            return LoadedCredentials(
                endpoint: endpoint,
                authentication: .token(ProviderTokenManager(signer: signer, clock: clock)),
                trustRoots: trustRoots,
                defaultTopic: nil
            )
        }
        guard let certificatePath else {
            throw ConfigurationError(
                "no credentials: give \(certificateFlag) FILE [\(keyFlag) FILE] or --auth-key FILE --key-id ID --team-id ID"
            )
        }
        let certificate: APNsClient.ClientCertificate
        do {
            if certificatePath.hasSuffix(".p12") || certificatePath.hasSuffix(".pfx") {
                certificate = try .loadPKCS12(
                    path: certificatePath,
                    passphrase: ProcessInfo.processInfo.environment["PUSHGATE_P12_PASSPHRASE"]
                )
            } else {
                certificate = try .load(certificatePath: certificatePath, keyPath: keyPath)
            }
        } catch {
            throw ConfigurationError("\(certificateFlag): \(error)")
        }
        if let expiry = certificate.notValidAfter, expiry < clock.now() {
            throw ConfigurationError("\(certificateFlag): the certificate expired on \(expiry.formatted(.iso8601))")
        }
        return LoadedCredentials(
            endpoint: endpoint,
            authentication: .certificate(certificate),
            trustRoots: trustRoots,
            defaultTopic: certificate.subjectUID
        )
    }
}

/// `pushgate send`'s credential flags.
struct APNsCredentialOptions: ParsableArguments {
    @Option(help: "Client certificate (PEM, or .p12 with PUSHGATE_P12_PASSPHRASE in the environment).")
    var cert: String?

    @Option(help: "Private key of the client certificate (PEM). Omit when the certificate file holds it too.")
    var key: String?

    @Option(name: .customLong("auth-key"), help: "Token auth: the .p8 signing key.")
    var authKey: String?

    @Option(name: .customLong("key-id"), help: "Token auth: the key id.")
    var keyID: String?

    @Option(name: .customLong("team-id"), help: "Token auth: the team id.")
    var teamID: String?

    @Flag(help: "Use api.sandbox.push.apple.com instead of api.push.apple.com.")
    var sandbox = false

    @Flag(name: .customLong("port-2197"), help: "Use port 2197 instead of 443.")
    var port2197 = false

    @Option(name: .customLong("apns-host"), help: "Connect to HOST:PORT instead (a simulator or a proxy).")
    var apnsHost: String?

    @Option(help: "Trust this CA file (PEM) for the server certificate instead of the system store.")
    var ca: String?

    func validate() throws {
        if cert != nil && authKey != nil { throw ValidationError("--cert and --auth-key are mutually exclusive") }
        if authKey != nil && (keyID == nil || teamID == nil) {
            throw ValidationError("--auth-key needs --key-id and --team-id")
        }
    }

    /// Whether any APNs credentials were given (`send` needs them unless it sends through FCM).
    var isEmpty: Bool { cert == nil && authKey == nil }

    func load() throws -> LoadedCredentials {
        try CredentialSources(
            certificatePath: cert,
            keyPath: key,
            authKeyPath: authKey,
            keyID: keyID,
            teamID: teamID,
            sandbox: sandbox,
            alternativePort: port2197,
            apnsHost: apnsHost,
            caPath: ca
        ).load()
    }
}
