import APNsHTTP2
import APNsTransport
import ArgumentParser
import FCMTransport
import Foundation
import Logging
import PushTransport
import PushgateCore
import WebPush
import WebPushTransport

/// `pushgate send`: one notification to one device, straight to APNs, (with `--fcm-token`) FCM or (with
/// `--webpush`) a browser's push service, or a simulator of any, printing the service's answer. Exit
/// status 0 only when it accepted it.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one notification to one device and print APNs' (or FCM's, or a push service's) answer.",
        discussion: """
            Exit status: 0 accepted by APNs (or FCM, or the browser's push service); 1 rejected or not \
            delivered; 64 bad flags; 78 unusable credentials or files.
            """
    )

    @Option(name: .customLong("device"), help: "The device token (hex).")
    var device: String?

    @Option(name: .customLong("fcm-token"), help: "An FCM registration token: send through FCM instead of APNs.")
    var fcmToken: String?

    @Option(name: .customLong("fcm-service-account"), help: "FCM: the service account's JSON key file.")
    var fcmServiceAccount: String?

    @Option(name: .customLong("fcm-host"), help: "FCM: connect to HOST instead of fcm.googleapis.com (a simulator).")
    var fcmHost: String?

    @Option(name: .customLong("fcm-port"), help: "FCM: the port (default 443).")
    var fcmPort: Int?

    @Option(
        name: .customLong("fcm-token-uri"),
        help: "FCM: exchange access tokens here, not at the account's token_uri."
    )
    var fcmTokenURI: String?

    @Option(
        name: .customLong("webpush"),
        help: "A browser's PushSubscription JSON file (subscription.toJSON()): send through Web Push instead of APNs."
    )
    var webPushSubscription: String?

    @Option(name: .customLong("vapid-key"), help: "Web Push: the VAPID private key, a PEM P-256 file.")
    var vapidKey: String?

    @Option(name: .customLong("vapid-subject"), help: "Web Push: the VAPID subject, mailto:... or https:...")
    var vapidSubject: String?

    @Option(help: "The bundle id. With certificate auth it defaults to the certificate subject's UID.")
    var topic: String?

    @OptionGroup var credentials: APNsCredentialOptions

    @Option(name: .customLong("push-type"), help: "alert, background, voip, liveactivity, ... (default alert).")
    var pushType: String = "alert"

    @Option(help: "10, 5 or 1 (default 10, or 5 for background).")
    var priority: Int?

    @Option(help: "UNIX time until which APNs may retry; 0 = deliver once. Omitted: APNs' storage policy.")
    var expiration: Int64?

    @Option(name: .customLong("collapse-id"), help: "apns-collapse-id (at most 64 bytes).")
    var collapseID: String?

    @Option(name: .customLong("apns-id"), help: "The apns-id (a UUID) to send; APNs makes one up otherwise.")
    var apnsID: String?

    @Option(help: "The JSON payload.")
    var payload: String?

    @Option(help: "Shortcut for --payload '{\"aps\":{\"alert\":TEXT}}'.")
    var alert: String?

    @Option(help: "Seconds to wait for the answer.")
    var timeout: Int = 30

    @Flag(name: .shortAndLong, help: "Log the connection's progress to stderr.")
    var verbose = false

    func validate() throws {
        if payload != nil && alert != nil { throw ValidationError("--payload and --alert are mutually exclusive") }
        if payload == nil && alert == nil { throw ValidationError("give --payload JSON or --alert TEXT") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        let targets = [device, fcmToken, webPushSubscription].compactMap { $0 }.count
        guard targets <= 1 else { throw ValidationError("--device, --fcm-token and --webpush are mutually exclusive") }
        if webPushSubscription != nil {
            if vapidKey == nil { throw ValidationError("--webpush needs --vapid-key FILE") }
            if vapidSubject == nil { throw ValidationError("--webpush needs --vapid-subject mailto:... or https:...") }
            return
        }
        switch (device, fcmToken) {
        case (nil, nil):
            throw ValidationError("give --device HEX (APNs), --fcm-token TOKEN (FCM) or --webpush FILE (a browser)")
        case (_?, _?): throw ValidationError("--device and --fcm-token are mutually exclusive")
        case (nil, _?):
            if fcmServiceAccount == nil { throw ValidationError("--fcm-token needs --fcm-service-account FILE") }
            if let fcmPort, !(1...65535).contains(fcmPort) { throw ValidationError("--fcm-port must be 1-65535") }
        case (_?, nil):
            if credentials.isEmpty {
                throw ValidationError("give --cert FILE [--key FILE] or --auth-key FILE --key-id ID --team-id ID")
            }
        }
    }

    func run() async throws {
        do {
            try await runChecked()
        } catch let error as ConfigurationError {
            FileHandle.standardError.write(Data("pushgate send: \(error)\n".utf8))
            throw ExitCode(78)
        }
    }

    /// What both services' messages are derived from.
    private struct Notification {
        var pushType: PushType
        var priority: Priority
        var expiration: Expiration
        var collapseID: CollapseID?
        var payload: Payload
    }

    private func notification() throws -> Notification {
        do {
            let type = try PushType(validating: pushType, field: "--push-type")
            let priority = try Priority(
                validating: self.priority ?? (type == .background ? 5 : 10),
                field: "--priority"
            )
            var expiration = Expiration.storagePolicy
            if let value = self.expiration { expiration = try Expiration(validating: value, field: "--expiration") }
            var collapse: CollapseID? = nil
            if let value = collapseID { collapse = try CollapseID(value, field: "--collapse-id") }
            let body = try alert.map(Payload.alert) ?? Payload(jsonString: payload!, field: "--payload")
            return Notification(
                pushType: type,
                priority: priority,
                expiration: expiration,
                collapseID: collapse,
                payload: body
            )
        } catch let error as PushgateCore.ValidationError {
            throw ValidationError(error.description)
        }
    }

    private func runChecked() async throws {
        if let fcmToken { return try await sendThroughFCM(to: fcmToken) }
        if let webPushSubscription { return try await sendThroughWebPush(subscriptionFile: webPushSubscription) }
        let token: DeviceToken
        let content: NotificationContent
        let id: APNsID?
        let credentials = try self.credentials.load()
        let notification = try notification()
        do {
            token = try DeviceToken(hex: device ?? "", field: "--device")
            id = try apnsID.map { try APNsID($0, field: "--apns-id") }
            guard let topicName = self.topic ?? credentials.defaultTopic else {
                throw ValidationError(
                    "give --topic (the certificate has no UID to take it from, or token auth is used)"
                )
            }
            content = try NotificationContent(
                topic: Topic(topicName, field: "--topic"),
                pushType: notification.pushType,
                priority: notification.priority,
                expiration: notification.expiration,
                collapseID: notification.collapseID,
                payload: notification.payload
            )
        } catch let error as PushgateCore.ValidationError {
            throw ValidationError(error.description)
        }
        try await send(content: content, to: token, apnsID: id, credentials: credentials)
    }

    private func send(
        content: NotificationContent,
        to token: DeviceToken,
        apnsID: APNsID?,
        credentials: LoadedCredentials
    ) async throws {
        var logger = Logger(label: "pushgate.send")
        logger.logLevel = verbose ? .debug : .warning
        var configuration = APNsClient.Configuration(
            endpoint: credentials.endpoint,
            authentication: credentials.authentication,
            trustRoots: credentials.trustRoots
        )
        configuration.maximumConnections = 1
        configuration.eventLoopThreads = 1
        configuration.requestTimeout = .seconds(Int64(timeout))
        configuration.connectTimeout = .seconds(Int64(min(timeout, 10)))
        configuration.shutdownGracePeriod = .seconds(1)
        let outcome = try await APNsClient.withClient(configuration: configuration, logger: logger) { client in
            await client.send(PreparedNotification(content), to: token, apnsID: apnsID)
        }
        print(Self.render(outcome))
        if !outcome.isAccepted { throw ExitCode.failure }
    }

    /// One message to one registration token through FCM (`--fcm-token`).
    private func sendThroughFCM(to registrationToken: String) async throws {
        let notification = try notification()
        let message: FCMMessage
        do {
            _ = try DeviceToken(fcm: registrationToken, field: "--fcm-token")
            message = try FCMMessage(
                payload: notification.payload,
                pushType: notification.pushType,
                priority: notification.priority,
                expiration: notification.expiration,
                collapseID: notification.collapseID,
                createdAt: Date()
            )
        } catch {
            throw ValidationError(error.description)
        }
        let account: FCMServiceAccount
        do {
            account = try FCMServiceAccount(contentsOfFile: fcmServiceAccount ?? "")
        } catch {
            throw ConfigurationError("--fcm-service-account: \(error)")
        }
        if let ca = credentials.ca, !FileManager.default.isReadableFile(atPath: ca) {
            throw ConfigurationError("--ca: cannot read \(ca)")
        }
        var logger = Logger(label: "pushgate.send")
        logger.logLevel = verbose ? .debug : .warning
        var configuration = FCMClient.Configuration(
            serviceAccount: account,
            host: fcmHost ?? "fcm.googleapis.com",
            port: fcmPort ?? 443,
            tokenURI: fcmTokenURI,
            trustRoots: credentials.ca.map { .caFile($0) } ?? .system
        )
        configuration.maxConnections = 1
        configuration.eventLoopThreads = 1
        configuration.requestTimeout = .seconds(timeout)
        configuration.connectTimeout = .seconds(min(timeout, 10))
        configuration.tokenExchangeTimeout = .seconds(min(timeout, 10))
        configuration.shutdownGracePeriod = .seconds(1)
        let outcome: FCMOutcome
        do {
            outcome = try await FCMClient.withClient(configuration: configuration, logger: logger) { client in
                try await client.prepare()
                return await client.send(message, to: registrationToken)
            }
        } catch let error as FCMCredentialError {
            throw ConfigurationError("FCM access token: \(error)")
        }
        print(Self.render(outcome))
        if !outcome.isAccepted { throw ExitCode.failure }
    }

    /// One message to one browser through its push service (`--webpush`): the gateway's own Web Push
    /// service (message, encryption, headers, VAPID), on a client of one connection.
    private func sendThroughWebPush(subscriptionFile: String) async throws {
        let notification = try notification()
        guard let json = FileManager.default.contents(atPath: subscriptionFile) else {
            throw ConfigurationError("--webpush: cannot read \(subscriptionFile)")
        }
        let subscription: WebPushSubscription
        let subject: VAPIDSubject
        do {
            subscription = try WebPushSubscription(jsonBytes: Array(json), field: "--webpush")
            subject = try VAPIDSubject(vapidSubject ?? "", field: "--vapid-subject")
            _ = try WebPushMessage(payload: notification.payload)
        } catch {
            throw ValidationError(error.description)
        }
        let key: VAPIDKey
        do {
            key = try VAPIDKey(contentsOfFile: vapidKey ?? "")
        } catch {
            throw ConfigurationError("--vapid-key: \(error)")
        }
        if let ca = credentials.ca, !FileManager.default.isReadableFile(atPath: ca) {
            throw ConfigurationError("--ca: cannot read \(ca)")
        }
        var logger = Logger(label: "pushgate.send")
        logger.logLevel = verbose ? .debug : .warning
        var configuration = WebPushClient.Configuration(
            vapidKey: key,
            subject: subject,
            trustRoots: credentials.ca.map { .caFile($0) } ?? .system
        )
        configuration.maximumConnectionsPerOrigin = 1
        configuration.eventLoopThreads = 1
        configuration.requestTimeout = .seconds(Int64(timeout))
        configuration.connectTimeout = .seconds(Int64(min(timeout, 10)))
        configuration.shutdownGracePeriod = .seconds(1)
        let request = NotificationRequest(
            id: try PushgateCore.RequestID("send"),
            pushType: notification.pushType,
            priority: notification.priority,
            expiration: notification.expiration,
            collapseID: notification.collapseID,
            payload: notification.payload,
            createdAt: Date()
        )
        let outcome = try await WebPushClient.withClient(configuration: configuration, logger: logger) { client in
            let prepared = try WebPushPushService(transport: client).prepare(request, logger: logger)
            let answer = WebPushSendAnswer()
            return await withCheckedContinuation { continuation in
                answer.install(continuation)
                let submission = prepared.submit(
                    [PushSend(token: subscription.deviceToken, tag: 0)],
                    sentAt: Date(),
                    to: answer
                )
                if let unsendable = submission.unsendable.first { answer.resume(unsendable.reason) }
            }
        }
        print(Self.render(outcome))
        if case .outcome(let pushed) = outcome, pushed.verdict == .delivered { return }
        throw ExitCode.failure
    }

    /// A push service's answer, one field per line.
    static func render(_ answer: WebPushSendAnswer.Result) -> String {
        switch answer {
        case .unsendable(let reason):
            return "error: \(reason)\noutcome: not sent"
        case .outcome(let outcome):
            var lines: [String] = []
            if let status = outcome.status { lines.append("status: \(status)") }
            if !outcome.reason.isEmpty { lines.append("reason: \(outcome.reason)") }
            if let notBefore = outcome.notBefore { lines.append("retry-after: \(notBefore.components.seconds) s") }
            switch outcome.verdict {
            case .invalidate: lines.append("subscription: gone (remove it)")
            case .configurationAlarm: lines.append("alarm: configuration (the VAPID key or subject was refused)")
            case .delivered, .retry, .failed: break
            }
            if let failure = outcome.failure { lines.append("error: \(failure)") }
            lines.append("outcome: \(outcome.outcomeClass)")
            return lines.joined(separator: "\n")
        }
    }

    /// FCM's answer, one field per line.
    static func render(_ outcome: FCMOutcome) -> String {
        var lines: [String] = []
        if let status = outcome.status { lines.append("status: \(status)") }
        if let name = outcome.messageName { lines.append("name: \(name)") }
        if let code = outcome.errorCode { lines.append("error: \(code)") }
        if let retryAfter = outcome.retryAfter { lines.append("retry-after: \(retryAfter.components.seconds) s") }
        if outcome.invalidatesDevice { lines.append("device: invalid (remove the registration token)") }
        if outcome.isConfigurationAlarm { lines.append("alarm: configuration (credentials or project)") }
        if let failure = outcome.transportFailure { lines.append("error: \(failure)") }
        lines.append("outcome: \(outcome.outcomeClass)")
        return lines.joined(separator: "\n")
    }

    /// Apple's answer, one field per line, as `curl -i` would show the parts that matter.
    static func render(_ outcome: APNsOutcome) -> String {
        var lines: [String] = []
        if let status = outcome.status { lines.append("status: \(status)") }
        if let reason = outcome.reason { lines.append("reason: \(reason)") }
        if let apnsID = outcome.apnsID { lines.append("apns-id: \(apnsID)") }
        if let unique = outcome.apnsUniqueID { lines.append("apns-unique-id: \(unique)") }
        if let timestamp = outcome.invalidatedAtMilliseconds {
            let date = Date(timeIntervalSince1970: Double(timestamp) / 1000)
            lines.append("timestamp: \(timestamp) (\(date.formatted(.iso8601)))")
        }
        if let failure = outcome.transportFailure { lines.append("error: \(failure)") }
        lines.append("outcome: \(outcome.outcomeClass)")
        return lines.joined(separator: "\n")
    }
}

/// The one answer `pushgate send --webpush` waits for, handed over by the push service's receiver.
final class WebPushSendAnswer: PushOutcomeReceiver, @unchecked Sendable {
    // @unchecked: `continuation` is only accessed under `lock`.
    enum Result: Sendable {
        case outcome(PushOutcome)
        case unsendable(String)
    }

    private let lock = NSLock()
    private var continuation: CheckedContinuation<Result, Never>?

    func install(_ continuation: CheckedContinuation<Result, Never>) {
        lock.withLock { self.continuation = continuation }
    }

    func receive(_ outcome: PushOutcome, token: DeviceToken, tag: UInt64) { finish(.outcome(outcome)) }

    func resume(_ reason: String) { finish(.unsendable(reason)) }

    private func finish(_ result: Result) {
        let continuation = lock.withLock { () -> CheckedContinuation<Result, Never>? in
            defer { self.continuation = nil }
            return self.continuation
        }
        continuation?.resume(returning: result)
    }
}
