public import APNsHTTP2
import Crypto
public import Foundation
public import PushTransport
public import PushgateCore
public import PushgateHTTP

/// A configuration whose files were read and checked: credentials parsed, certificates in date, API
/// keys hashed. What the gateway is built from.
public struct LoadedConfiguration: Sendable {
    public var configuration: GatewayConfiguration
    public var apps: [LoadedApp]
    public var apiKeys: [LoadedAPIKey]
    /// PostgreSQL's password when it does not come with `store.url`
    /// (``GatewayConfiguration/loadStorePassword(environment:)``).
    public var storePassword: String? = nil
    /// The HTTP API's TLS context, its files read and checked (nil: no `http.tls`, or no API).
    public var httpTLS: ReloadableTLSContext? = nil
}

/// One app, ready to connect: its own client configuration (hence its own connections).
public struct LoadedApp: Sendable {
    public var name: String
    public var topic: Topic
    public var environment: APNsEnvironment
    /// Endpoint, credentials, trust and pool limits of the app's APNs client.
    public var client: APNsClient.Configuration
    public var transport: GatewayConfiguration.App.Transport
    /// The binary interface's gateway and feedback endpoints (used with `transport: legacy`).
    public var legacyGateway: APNsClient.Endpoint
    public var legacyFeedback: APNsClient.Endpoint
    public var legacyFeedbackInterval: Duration?
    /// The app's FCM route; nil: none configured.
    public var fcm: LoadedFCM? = nil
    /// The app's Web Push route; nil: none configured.
    public var webPush: LoadedWebPush? = nil
}

/// An API key as the HTTP API checks it: the SHA-256 of the key (the key itself is not kept).
public struct LoadedAPIKey: Sendable, Hashable {
    public var sha256: [UInt8]
    /// The only app the key may act on (nil: all).
    public var app: String?

    public init(sha256: [UInt8], app: String?) {
        self.sha256 = sha256
        self.app = app
    }
}

extension GatewayConfiguration {
    /// Keys shorter than this are refused: a bearer key must not be guessable.
    public static let minimumAPIKeyLength = 16

    /// Opens every file the configuration names and checks what is in it. Token apps of the same team
    /// and key get one shared `ProviderTokenManager` (APNs wants one provider token per team and key,
    /// not one per connection); every app still gets its own client, so apps never share a connection.
    ///
    /// - Parameter environment: where `.p12` passphrases are looked up (by the variable the app names), and
    ///   PostgreSQL's password (`PUSHGATE_STORE_PASSWORD`).
    public func loadCredentials(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        clock: any WallClock = SystemWallClock()
    ) throws(ConfigurationProblem) -> LoadedConfiguration {
        try validate()
        func fail(_ key: String, _ message: String) -> ConfigurationProblem {
            ConfigurationProblem(key: flagNames[key] ?? key, message)
        }
        var tokenManagers: [TokenIdentity: ProviderTokenManager] = [:]
        var loaded: [LoadedApp] = []
        for app in apps {
            let prefix = "app.\(app.name)"
            let endpoint: APNsClient.Endpoint
            if let host = app.apnsHost {
                do { endpoint = try APNsClient.Endpoint(parsing: host) } catch {
                    throw fail("\(prefix).apnsHost", error.message)
                }
            } else {
                endpoint = .apple(app.environment, alternativePort: app.alternativePort)
            }
            var trustRoots = APNsClient.TrustRoots.system
            if let ca = app.caFile {
                guard FileManager.default.isReadableFile(atPath: ca) else {
                    throw fail("\(prefix).ca", "cannot read \(ca)")
                }
                trustRoots = .caFile(ca)
            }
            let authentication: APNsClient.Authentication
            var certificateTopic: String?
            switch app.authentication {
            case nil:
                throw fail("\(prefix).certificate.file", "no credentials")
            case .token(let keyFile, let keyID, let teamID):
                let key = "\(prefix).token.keyFile"
                guard let pem = FileManager.default.contents(atPath: keyFile) else {
                    throw fail(key, "cannot read \(keyFile)")
                }
                let identity = TokenIdentity(teamID: teamID, keyID: keyID, pem: pem)
                if let shared = tokenManagers[identity] {
                    authentication = .token(shared)
                } else {
                    if tokenManagers.keys.contains(where: { $0.keyID == keyID && $0.teamID == teamID }) {
                        throw fail(
                            key,
                            "another app uses key id \(keyID) of team \(teamID) with a different key file content"
                        )
                    }
                    let signer: ProviderTokenSigner
                    do {
                        signer = try ProviderTokenSigner(
                            pemRepresentation: String(decoding: pem, as: UTF8.self),
                            keyID: keyID,
                            teamID: teamID
                        )
                    } catch {
                        throw fail(key, "\(keyFile): \(error)")
                    }
                    let manager = ProviderTokenManager(signer: signer, clock: clock)
                    tokenManagers[identity] = manager
                    authentication = .token(manager)
                }
            case .certificate(let file, let keyPath):
                let certificate: APNsClient.ClientCertificate
                guard FileManager.default.isReadableFile(atPath: file) else {
                    throw fail("\(prefix).certificate.file", "cannot read \(file)")
                }
                if let keyPath, !FileManager.default.isReadableFile(atPath: keyPath) {
                    throw fail("\(prefix).certificate.key", "cannot read \(keyPath)")
                }
                do {
                    certificate = try .load(certificatePath: file, keyPath: keyPath)
                } catch {
                    throw fail(
                        keyPath != nil && "\(error)".contains(keyPath!)
                            ? "\(prefix).certificate.key" : "\(prefix).certificate.file",
                        "\(error)"
                    )
                }
                try Self.checkValidity(
                    certificate,
                    key: flagNames["\(prefix).certificate.file"] ?? "\(prefix).certificate.file",
                    clock: clock
                )
                certificateTopic = certificate.subjectUID
                authentication = .certificate(certificate)
            case .pkcs12(let file, let variable):
                let key = "\(prefix).certificate.p12"
                guard FileManager.default.isReadableFile(atPath: file) else { throw fail(key, "cannot read \(file)") }
                let certificate: APNsClient.ClientCertificate
                do {
                    certificate = try .loadPKCS12(path: file, passphrase: variable.flatMap { environment[$0] })
                } catch {
                    throw fail(key, "\(error)")
                }
                try Self.checkValidity(certificate, key: flagNames[key] ?? key, clock: clock)
                certificateTopic = certificate.subjectUID
                authentication = .certificate(certificate)
            }
            guard let topicName = app.topic ?? certificateTopic else {
                throw fail("\(prefix).topic", "not given and the certificate has no subject UID to take it from")
            }
            let topic: Topic
            do { topic = try Topic(topicName) } catch { throw fail("\(prefix).topic", error.message) }

            var client = APNsClient.Configuration(
                endpoint: endpoint,
                authentication: authentication,
                trustRoots: trustRoots
            )
            client.maximumConnections = app.pool.maximumConnections
            client.maximumStreamsPerConnection = app.pool.maximumStreams
            client.maximumNotificationsPerSecondPerConnection = app.pool.rate == 0 ? nil : app.pool.rate
            client.pingInterval = app.pool.pingMinutes == 0 ? nil : .minutes(Int64(app.pool.pingMinutes))
            client.idleTimeout = app.pool.idleHours == 0 ? nil : .hours(Int64(app.pool.idleHours))
            // validate() parsed these already.
            let legacyGateway = try! APNsClient.Endpoint(parsing: app.legacy.gatewayHost(app.environment))
            let legacyFeedback = try! APNsClient.Endpoint(parsing: app.legacy.feedbackHost(app.environment))
            loaded.append(
                LoadedApp(
                    name: app.name,
                    topic: topic,
                    environment: app.environment,
                    client: client,
                    transport: app.transport,
                    legacyGateway: legacyGateway,
                    legacyFeedback: legacyFeedback,
                    legacyFeedbackInterval: app.legacy.feedbackIntervalSeconds == 0
                        ? nil : .seconds(app.legacy.feedbackIntervalSeconds),
                    fcm: try app.fcm?.load(fail: { key, message in fail("\(prefix).fcm.\(key)", message) }),
                    webPush: try app.webPush?.load(fail: { key, message in fail("\(prefix).webpush.\(key)", message) })
                )
            )
        }
        return LoadedConfiguration(
            configuration: self,
            apps: loaded,
            apiKeys: try loadAPIKeys(),
            storePassword: try loadStorePassword(environment: environment),
            httpTLS: try loadHTTPTLS(clock: clock)
        )
    }

    /// Reads `http.tls.*` when the API is on: certificate, key (which must belong to it) and client CA.
    public func loadHTTPTLS(clock: any WallClock) throws(ConfigurationProblem) -> ReloadableTLSContext? {
        guard let tls = http.tls, http.port >= 0 else { return nil }
        do {
            return try ReloadableTLSContext(
                files: HTTPTLSFiles(certificate: tls.certificate, key: tls.key, clientCA: tls.clientCA),
                clock: clock
            )
        } catch {
            throw ConfigurationProblem(key: flagNames[error.key] ?? error.key, error.description)
        }
    }

    /// The configured API keys as hashes: `sha256:` values as given, files read and hashed line by line.
    public func loadAPIKeys() throws(ConfigurationProblem) -> [LoadedAPIKey] {
        var keys: [LoadedAPIKey] = []
        for entry in apiKeys {
            switch entry.source {
            case .hash(let text):
                guard let digest = Self.parseSHA256(text) else {
                    throw ConfigurationProblem(
                        key: "apiKey.\(entry.name).hash",
                        "must be \"sha256:\" and 64 hex digits"
                    )
                }
                keys.append(LoadedAPIKey(sha256: digest, app: entry.app))
            case .file(let path):
                let key = flagNames["apiKey.\(entry.name).file"] ?? "apiKey.\(entry.name).file"
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw ConfigurationProblem(key: key, "cannot read \(path)")
                }
                var found = 0
                for (index, line) in String(decoding: data, as: UTF8.self).split(
                    separator: "\n",
                    omittingEmptySubsequences: false
                )
                .enumerated() {
                    let secret = line.trimmingCharacters(in: .whitespacesAndNewlines)
                    if secret.isEmpty || secret.hasPrefix("#") { continue }
                    guard secret.count >= Self.minimumAPIKeyLength else {
                        // The line number, never the key.
                        throw ConfigurationProblem(
                            key: key,
                            "\(path) line \(index + 1): a key must be at least \(Self.minimumAPIKeyLength) characters"
                        )
                    }
                    keys.append(LoadedAPIKey(sha256: Array(SHA256.hash(data: Data(secret.utf8))), app: entry.app))
                    found += 1
                }
                guard found > 0 else { throw ConfigurationProblem(key: key, "\(path) holds no key (one per line)") }
            }
        }
        return keys
    }

    static func checkValidity(
        _ certificate: APNsClient.ClientCertificate,
        key: String,
        clock: any WallClock
    ) throws(ConfigurationProblem) {
        if let expiry = certificate.notValidAfter, expiry < clock.now() {
            throw ConfigurationProblem(key: key, "the certificate expired on \(expiry.formatted(.iso8601))")
        }
    }
}

/// Apps with equal team, key id and key share one provider token.
private struct TokenIdentity: Hashable {
    var teamID: String
    var keyID: String
    var pem: Data
}
