import APNsHTTP2
import Foundation
import PushTransport
import PushgateCore
import WebPush

extension GatewayConfiguration {
    /// The checks that need no file: ranges, names, combinations. Throws the first problem, naming its
    /// key (or the flag that set it). Files are opened afterwards by ``loadCredentials(environment:clock:)``.
    public func validate() throws(ConfigurationProblem) {
        func fail(_ key: String, _ message: String) -> ConfigurationProblem {
            ConfigurationProblem(key: flagNames[key] ?? key, message)
        }
        guard !listen.isEmpty else { throw fail("listen", "must not be empty") }
        for (key, port) in [
            ("udp.registrationPort", udp.registrationPort), ("udp.notificationPort", udp.notificationPort),
        ]
        where !(0...65_535).contains(port) {
            throw fail(key, "\(port) is not a port number (0 to 65535)")
        }
        if udp.registrationPort != 0 && udp.registrationPort == udp.notificationPort {
            throw fail("udp.notificationPort", "must differ from udp.registrationPort (both \(udp.registrationPort))")
        }
        guard (-1...65_535).contains(http.port) else {
            throw fail("http.port", "\(http.port) is not a port number (0 to 65535; -1 turns the API off)")
        }
        if let host = http.host, host.isEmpty { throw fail("http.host", "must not be empty") }
        if let tls = http.tls {
            for (key, path) in [
                ("http.tls.certificate", tls.certificate), ("http.tls.key", tls.key),
                ("http.tls.clientCA", tls.clientCA ?? "-"),
            ]
            where path.isEmpty {
                throw fail(key, "must not be empty")
            }
        }
        if let allow = udp.allow, allow.isEmpty {
            throw fail("udp.allow", "must name at least one CIDR range (leave it out for the default)")
        }
        guard !store.path.isEmpty else { throw fail("store.path", "must not be empty") }
        if let url = store.url, !(url.hasPrefix("postgres://") || url.hasPrefix("postgresql://")) {
            throw fail("store.url", "must be a postgres:// URL")
        }
        if store.passwordFile != nil && store.url == nil {
            throw fail("store.passwordFile", "needs --store (or store.url)")
        }
        if let minimum = store.minimumFreeBytes, minimum < 0 {
            throw fail("store.minimumFreeBytes", "must be 0 or more bytes (0: no disk-space alarm)")
        }
        if store.retentionSeconds != 0 && store.retentionSeconds < Store.minimumRetentionSeconds {
            throw fail(
                "store.retention",
                "at least 1d (a request's idempotency key lasts a day), or off to keep every request"
            )
        }
        if let chunkSize = store.chunkSize, chunkSize < 1 { throw fail("store.chunkSize", "at least 1") }
        if let lease = store.lease, lease < Store.minimumLease {
            throw fail("store.lease", "at least \(Store.minimumLease.components.seconds) seconds")
        }
        guard udp.receiveBufferBytes > 0 else { throw fail("udp.receiveBufferBytes", "must be positive") }
        if let instanceID, instanceID.isEmpty { throw fail("instanceId", "must not be empty") }
        guard Self.logLevels.contains(logLevel) else {
            throw fail("logLevel", "unknown level \"\(logLevel)\" (one of \(Self.logLevels.joined(separator: ", ")))")
        }

        guard shutdownTimeoutSeconds >= 1 else { throw fail("shutdown.timeout", "at least 1 second") }
        guard Self.logFormats.contains(logFormat) else {
            throw fail(
                "logFormat",
                "unknown format \"\(logFormat)\" (one of \(Self.logFormats.joined(separator: ", ")))"
            )
        }
        let guardKeys = misconfiguration
        if guardKeys.windowSeconds < 1 { throw fail("misconfiguration.window", "at least 1 second") }
        if guardKeys.minimumAnswers < 1 { throw fail("misconfiguration.minimumAnswers", "at least 1") }
        if !(guardKeys.share > 0 && guardKeys.share < 1) {
            throw fail("misconfiguration.share", "must lie between 0 and 1 (got \(guardKeys.share))")
        }
        if guardKeys.probeAfterSeconds < 1 { throw fail("misconfiguration.probeAfter", "at least 1 second") }
        if guardKeys.probeLimitSeconds < guardKeys.probeAfterSeconds {
            throw fail(
                "misconfiguration.probeLimit",
                "at least misconfiguration.probeAfter (\(guardKeys.probeAfterSeconds))"
            )
        }
        if guardKeys.probeAnswers < 1 { throw fail("misconfiguration.probeAnswers", "at least 1") }

        guard !apps.isEmpty else { throw fail("apps", "at least one app is needed") }
        var appNames = Set<String>()
        for app in apps {
            guard Self.isValidName(app.name) else {
                throw fail(
                    "apps",
                    "\"\(app.name)\" is not a valid app name (1 to 64 of a-z, 0-9, '_', '-', starting with a letter or digit)"
                )
            }
            guard appNames.insert(app.name).inserted else { throw fail("apps", "app \"\(app.name)\" is listed twice") }
        }
        for app in apps { try app.validate(flagNames: flagNames) }
        try validateSharedTokenKeys(fail: fail)

        var keyNames = Set<String>()
        for entry in apiKeys {
            let prefix = "apiKey.\(entry.name)"
            guard Self.isValidName(entry.name) else {
                throw fail("apiKeys", "\"\(entry.name)\" is not a valid key name (1 to 64 of a-z, 0-9, '_', '-')")
            }
            guard keyNames.insert(entry.name).inserted else {
                throw fail("apiKeys", "key \"\(entry.name)\" is listed twice")
            }
            switch entry.source {
            case .hash(let text):
                guard Self.parseSHA256(text) != nil else {
                    throw fail("\(prefix).hash", "must be \"sha256:\" and 64 hex digits (the SHA-256 of the key)")
                }
            case .file(let path):
                guard !path.isEmpty else { throw fail("\(prefix).file", "must not be empty") }
            }
            if let app = entry.app, !appNames.contains(app) {
                throw fail("\(prefix).app", "no app named \"\(app)\" is configured")
            }
        }
        let httpHost = http.effectiveHost(listen: listen, hasKeys: !apiKeys.isEmpty)
        if http.port >= 0 && apiKeys.isEmpty && !Self.isLoopback(httpHost) {
            throw fail(
                "http.host",
                "\(httpHost) is not a loopback address; without API keys the HTTP API listens on loopback only (configure apiKeys or --api-key-file)"
            )
        }
    }

    /// Two token apps naming the same key id must be of the same team: one key belongs to one team.
    private func validateSharedTokenKeys(fail: (String, String) -> ConfigurationProblem) throws(ConfigurationProblem) {
        var teamOfKey: [String: (team: String, app: String)] = [:]
        for app in apps {
            guard case .token(_, let keyID, let teamID) = app.authentication else { continue }
            if let first = teamOfKey[keyID], first.team != teamID {
                throw fail(
                    "app.\(app.name).token.teamId",
                    "key id \(keyID) is used by app \(first.app) with team \(first.team); one key belongs to one team"
                )
            }
            teamOfKey[keyID] = teamOfKey[keyID] ?? (teamID, app.name)
        }
    }

    public static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
    public static let logFormats = ["text", "json"]

    /// App and API key names are keys in the configuration (`app.NAME.topic`, `APP_NAME_TOPIC`,
    /// `--app-name-topic`), so they stay within what all three spell the same way.
    public static func isValidName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.utf8.count <= 64 else { return false }
        func allowed(_ scalar: Unicode.Scalar) -> Bool {
            switch scalar {
            case "a"..."z", "0"..."9", "_", "-": true
            default: false
            }
        }
        return allowed(first) && first != "_" && first != "-" && name.unicodeScalars.allSatisfy(allowed)
    }

    /// The 32 bytes of `sha256:HEX` (64 hex digits, either case), or nil.
    public static func parseSHA256(_ text: String) -> [UInt8]? {
        guard text.hasPrefix("sha256:") else { return nil }
        let hex = Array(text.utf8.dropFirst("sha256:".utf8.count))
        guard hex.count == 64 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        for index in stride(from: 0, to: 64, by: 2) {
            guard let high = nibble(hex[index]), let low = nibble(hex[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// What a JWT header or claim can carry without escaping (the signer refuses the rest too).
    static func isValidIdentifier(_ value: String) -> Bool {
        !value.isEmpty
            && value.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F && $0 != "\"" && $0 != "\\" }
    }

    /// 127.0.0.0/8, ::1 and `localhost`.
    public static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.first == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}

extension GatewayConfiguration.App {
    func validate(flagNames: [String: String]) throws(ConfigurationProblem) {
        let prefix = "app.\(name)"
        func fail(_ key: String, _ message: String) -> ConfigurationProblem {
            let full = "\(prefix).\(key)"
            return ConfigurationProblem(key: flagNames[full] ?? full, message)
        }
        if let topic {
            do { _ = try Topic(topic) } catch { throw fail("topic", error.message) }
        }
        if let apnsHost {
            do { _ = try APNsClient.Endpoint(parsing: apnsHost) } catch { throw fail("apnsHost", error.message) }
        }
        if let caFile, caFile.isEmpty { throw fail("ca", "must not be empty") }
        switch authentication {
        case nil where fcm != nil || webPush != nil:
            let (key, name) = fcm != nil ? ("fcm", "FCM") : ("webpush", "Web Push")
            throw fail(
                "certificate.file",
                "no APNs credentials: an app with \(key).* needs APNs credentials too (\(name)-only apps are not supported)"
            )
        case nil:
            throw fail(
                "certificate.file",
                "no credentials: give certificate.file (and certificate.key), certificate.p12, or token.keyFile with token.keyId and token.teamId"
            )
        case .certificate(let file, let key):
            guard !file.isEmpty else { throw fail("certificate.file", "must not be empty") }
            if let key, key.isEmpty { throw fail("certificate.key", "must not be empty") }
        case .pkcs12(let file, _):
            guard !file.isEmpty else { throw fail("certificate.p12", "must not be empty") }
        case .token(let keyFile, let keyID, let teamID):
            guard !keyFile.isEmpty else { throw fail("token.keyFile", "must not be empty") }
            guard GatewayConfiguration.isValidIdentifier(keyID) else {
                throw fail("token.keyId", "must be a key id such as ABC123DEFG")
            }
            guard GatewayConfiguration.isValidIdentifier(teamID) else {
                throw fail("token.teamId", "must be a team id such as DEF123GHIJ")
            }
            guard topic != nil else {
                throw fail("topic", "required with token authentication (a token names no bundle id)")
            }
        }
        guard pool.maximumConnections >= 1 else { throw fail("pool.maxConnections", "must be at least 1") }
        if let streams = pool.maximumStreams, streams < 1 { throw fail("pool.maxStreams", "must be at least 1") }
        guard pool.rate >= 0 else { throw fail("pool.rate", "must be 0 (no limit) or notifications per second") }
        guard pool.pingMinutes >= 0 else { throw fail("pool.pingMinutes", "must be 0 (off) or a number of minutes") }
        guard pool.idleHours >= 0 else { throw fail("pool.idleHours", "must be 0 (off) or a number of hours") }
        if let fcm { try fcm.validate(fail: { key, message in fail("fcm.\(key)", message) }) }
        if let webPush { try webPush.validate(fail: { key, message in fail("webpush.\(key)", message) }) }
        switch transport {
        case .http2:
            if legacy != Legacy() {
                throw fail(
                    "transport",
                    "legacy.* is set but transport is http2; set transport: legacy or remove legacy.*"
                )
            }
        case .legacy:
            if case .token = authentication {
                throw fail("transport", "the legacy binary interface needs certificate authentication, not a token")
            }
            for (key, value) in [("legacy.host", legacy.host), ("legacy.feedbackHost", legacy.feedbackHost)] {
                guard let value else { continue }
                do { _ = try APNsClient.Endpoint(parsing: value) } catch {
                    throw fail(key, "expected HOST:PORT, got \"\(value)\"")
                }
            }
            guard legacy.feedbackIntervalSeconds >= 0 else {
                throw fail("legacy.feedbackInterval", "must be 0 (off) or a number of seconds")
            }
        }
    }
}

extension GatewayConfiguration.App.WebPush {
    /// `fail` takes the key below `app.NAME.webpush.`. The key file is read at load.
    func validate(fail: (String, String) -> ConfigurationProblem) throws(ConfigurationProblem) {
        guard !vapidKeyFile.isEmpty else { throw fail("vapidKey", "must not be empty") }
        do { _ = try VAPIDSubject(subject, field: "subject") } catch { throw fail("subject", error.message) }
        if let caFile, caFile.isEmpty { throw fail("ca", "must not be empty") }
        guard maximumConnectionsPerOrigin >= 1 else { throw fail("pool.maxConnectionsPerOrigin", "must be at least 1") }
        guard maximumConnections >= maximumConnectionsPerOrigin else {
            throw fail(
                "pool.maxConnections",
                "must be at least pool.maxConnectionsPerOrigin (\(maximumConnectionsPerOrigin))"
            )
        }
    }
}

extension GatewayConfiguration.App.FCM {
    /// `fail` takes the key below `app.NAME.fcm.`.
    func validate(fail: (String, String) -> ConfigurationProblem) throws(ConfigurationProblem) {
        guard !serviceAccountFile.isEmpty else { throw fail("serviceAccount", "must not be empty") }
        if let host {
            do { _ = try Endpoint(parsing: host) } catch { throw fail("host", "expected HOST[:PORT], got \"\(host)\"") }
        }
        if let tokenURI {
            guard let url = URL(string: tokenURI), FCMServiceAccount.isAcceptableTokenURI(url) else {
                throw fail(
                    "tokenUri",
                    "must be an absolute https URL, or http on loopback (got \"\(tokenURI.prefix(80))\")"
                )
            }
        }
        if let caFile, caFile.isEmpty { throw fail("ca", "must not be empty") }
        guard maximumConnections >= 1 else { throw fail("pool.maxConnections", "must be at least 1") }
        if let streams = maximumStreams, streams < 1 { throw fail("pool.maxStreams", "must be at least 1") }
    }
}
