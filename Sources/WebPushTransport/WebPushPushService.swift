public import Foundation
public import Logging
public import PushTransport
public import PushgateCore
import WebPush

/// Web Push as a plug-in of the dispatcher (``PushService``, platform `.webpush`): an app's browser
/// devices go to its ``WebPushClient``. The message (``WebPushMessage``: the payload with the request's
/// `webpush` merge patch) is built once per request; each device gets its own encryption (a fresh key
/// and salt), its headers (`TTL` counted at send time) and the origin's VAPID header (added by the client).
///
/// Answers (``PushOutcome/init(webPush:)``): 201 delivered; 404/410 invalidate the subscription; 400, 413
/// and other refusals fail the message; 429/5xx are retried no earlier than `Retry-After`; 401/403 (VAPID
/// refused twice) are a configuration alarm, never an invalidation.
public final class WebPushPushService: PushService {
    /// The reason recorded for browser devices of a request whose Web Push message cannot be built.
    public static let invalidMessage = "webpush_invalid_message"
    /// The reason recorded for a device whose stored subscription no longer parses.
    public static let invalidSubscription = "webpush_invalid_subscription"

    public let transport: any WebPushNotificationTransport
    /// The request's `webpush` object (RFC 7396 merge patch over the payload), when it has one. The seam
    /// for the request schema: `NotificationRequest` does not carry the override yet; the gateway passes
    /// `{ $0.webPush }` once it does. Nil for every request by default.
    private let override: @Sendable (NotificationRequest) -> WebPushOverride?

    public init(
        transport: any WebPushNotificationTransport,
        override: @escaping @Sendable (NotificationRequest) -> WebPushOverride? = { _ in nil }
    ) {
        self.transport = transport
        self.override = override
    }

    public var platform: PushPlatform { .webpush }

    public var inFlightCapacity: Int { transport.inFlightCapacity }

    public var transportID: ObjectIdentifier { ObjectIdentifier(transport) }

    /// The message, built once. A request whose message cannot be built fails its browser devices only
    /// (``invalidMessage``), logged here once.
    public func prepare(_ request: NotificationRequest, logger: Logger) throws -> any PreparedPush {
        let prepared = WebPushPreparedMessage(request: request, override: override(request), transport: transport)
        if case .failure(let error) = prepared.message {
            logger.error(
                "stored request has no valid Web Push message; its browser devices fail",
                metadata: ["push.request_id": "\(request.id)", "error": "\(error)"]
            )
        }
        return prepared
    }

    public func withdraw(_ ids: [UInt64]) -> Int {
        ids.isEmpty ? 0 : transport.withdraw(ids)
    }

    public func alarmMessage(reason: String) -> String {
        switch reason {
        case Self.invalidSubscription:
            "a stored Web Push subscription no longer parses; its device fails and is not pruned"
        case Self.invalidMessage:
            "a request has no valid Web Push message; its browser devices fail"
        default:
            "a Web Push service refused the app's VAPID key or token (\(reason)); check app.NAME.webpush.vapidKey"
                + " and subject; its browser devices fail and are not pruned"
        }
    }
}

/// A request's Web Push message, built once, and the client it goes to.
public struct WebPushPreparedMessage: PreparedPush {
    public let request: NotificationRequest
    public let message: Result<WebPushMessage, ValidationError>
    let transport: (any WebPushNotificationTransport)?

    public init(
        request: NotificationRequest,
        override: WebPushOverride? = nil,
        transport: (any WebPushNotificationTransport)? = nil
    ) {
        self.request = request
        self.message = Result { () throws(ValidationError) in try WebPushMessage(request: request, override: override) }
        self.transport = transport
    }

    /// Encrypts the message for each device (a fresh key and salt each) with the headers of `now`, and
    /// hands them to the client in one batch.
    public func submit(_ sends: [PushSend], sentAt now: Date, to receiver: any PushOutcomeReceiver) -> PushSubmission {
        guard let transport, case .success(let message) = message else {
            return PushSubmission(
                ids: [],
                submitted: 0,
                unsendable: sends.map { UnsendablePush(send: $0, reason: WebPushPushService.invalidMessage) }
            )
        }
        let headers = WebPushHeaders(request: request, sentAt: now)
        let forwarder = WebPushOutcomeForwarder(receiver)
        let plaintext = message.plaintext
        // The encryption is most of a message's cost: spread over every core (``WebPushBatchEncryption``).
        let encrypted = WebPushBatchEncryption.map(sends) { send -> WebPushSendRequest? in
            guard let subscription = try? WebPushSubscription(deviceToken: send.token),
                let body = try? WebPushEncryption.encrypt(plaintext, for: subscription)
            else { return nil }
            return WebPushSendRequest(
                subscription: subscription,
                headers: headers,
                body: body,
                tag: send.tag,
                receiver: forwarder,
                token: send.token
            )
        }
        var requests: [WebPushSendRequest] = []
        requests.reserveCapacity(sends.count)
        var unsendable: [UnsendablePush] = []
        for (send, request) in zip(sends, encrypted) {
            if let request {
                requests.append(request)
            } else {
                unsendable.append(UnsendablePush(send: send, reason: WebPushPushService.invalidSubscription))
            }
        }
        let ids = requests.isEmpty ? [] : transport.submit(requests)
        return PushSubmission(ids: ids, submitted: requests.count, unsendable: unsendable)
    }
}

/// Hands the client's answers to the dispatcher's receiver in its words. One per submitted batch.
final class WebPushOutcomeForwarder: WebPushOutcomeReceiver {
    let receiver: any PushOutcomeReceiver

    init(_ receiver: any PushOutcomeReceiver) {
        self.receiver = receiver
    }

    func receive(_ outcome: WebPushOutcome, for request: WebPushSendRequest) {
        receiver.receive(PushOutcome(webPush: outcome), token: request.token, tag: request.tag)
    }
}

extension PushOutcome {
    /// A Web Push answer in the dispatcher's words. Invalidations are recorded with the APNs reason of the
    /// same meaning (``APNsReason/unregistered``), so that the registry keeps one vocabulary; the ledger's
    /// reason is `webpush_<status>`; no answer is read as for every service.
    public init(webPush outcome: WebPushOutcome) {
        switch outcome {
        case .answered(let answer):
            self.init(webPush: answer)
        case .failed(let failure):
            self.init(
                service: .webpush,
                verdict: Self.verdict(noAnswer: failure),
                outcomeClass: failure.isConnectionFatal ? .connectionFatal : .retryable,
                status: nil,
                reason: failure.label,
                metricsReason: failure.label
            )
            self.failure = failure
        }
    }

    private init(webPush answer: WebPushAnswer) {
        let verdict: Verdict
        let outcomeClass: OutcomeClass
        let status: Int
        var notBefore: Duration? = nil
        switch answer {
        case .delivered:
            (verdict, outcomeClass, status) = (.delivered, .accepted, 201)
        case .invalidateSubscription(let code):
            (verdict, outcomeClass, status) = (.invalidate(reason: .unregistered, at: nil), .rejected, code)
        case .failMessage(let code):
            (verdict, outcomeClass, status) = (.failed, .rejected, code)
        case .retry(let code, let after):
            (verdict, outcomeClass, status) = (.retry, .retryable, code)
            notBefore = after
        case .configurationAlarm(let code):
            // Not held: a 403 can be one subscription's (made for another key), and would hold every
            // message to it until its request expires.
            (verdict, outcomeClass, status) = (.configurationAlarm(held: false), .rejected, code)
        }
        let reason = answer == .delivered ? "" : "webpush_\(status)"
        self.init(
            service: .webpush,
            verdict: verdict,
            outcomeClass: outcomeClass,
            status: status,
            reason: reason,
            metricsReason: answer == .delivered ? "none" : Self.webPushMetricsReason(status)
        )
        self.notBefore = notBefore
    }

    /// Bounded: the statuses RFC 8030 and the push services document, else `unknown`.
    private static func webPushMetricsReason(_ status: Int) -> String {
        switch status {
        case 400, 401, 403, 404, 410, 413, 429, 500, 502, 503, 504: "webpush_\(status)"
        default: "unknown"
        }
    }
}
