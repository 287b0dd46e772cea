import Foundation
import Logging
import PushTransport
import PushgateCore

/// A stored request in the forms its app's services take, built once (a request is immutable) and kept
/// for the chunks and retries that follow: one ``PreparedPush`` per service of the app.
struct PreparedRequest: Sendable {
    /// One service of the app and the request in its form.
    struct Service: Sendable {
        let service: any PushService
        let prepared: any PreparedPush
        /// `service.platform`, read once.
        let platform: PushPlatform
    }

    let request: NotificationRequest
    let services: [Service]

    /// Prepares `request` for each of the route's services. Throws when a service cannot carry it at all
    /// (``PushService/prepare(_:logger:)``): nothing of it is sent.
    init(_ request: NotificationRequest, route: DeliveryRoute, logger: Logger) throws {
        self.request = request
        self.services = try route.services.map { service in
            Service(
                service: service,
                prepared: try service.prepare(request, logger: logger),
                platform: service.platform
            )
        }
    }
}

/// One batch of sends of one request, split by each device's service (the registry's platform): each
/// service's devices go to it in one submission. Devices of a platform the app has no service for fail
/// (``OutcomeDisposition/notConfigured(_:)``) without waiting for a service that is not there and without
/// holding up the others; so do those a service sets apart when it submits (``PushSubmission/unsendable``).
struct RoutedSends {
    private var groups: [(service: PreparedRequest.Service, sends: [PushSend])] = []
    private(set) var unsendable: [UnsendablePush] = []
    /// Devices put in ``groups``: announced to the collector before they are submitted.
    private(set) var sendCount = 0
    private let capacity: Int

    init(reservingCapacity count: Int = 0) {
        capacity = count
    }

    /// `express`: the send must not wait behind a broadcast (``PushSend/isExpress``).
    mutating func add(_ token: DeviceToken, tag: UInt64, prepared: PreparedRequest, express: Bool = false) {
        let send = PushSend(token: token, tag: tag, isExpress: express)
        // A linear search: an app has a service or three.
        if let index = groups.firstIndex(where: { $0.service.platform == token.platform }) {
            groups[index].sends.append(send)
        } else if let service = prepared.services.first(where: { $0.platform == token.platform }) {
            var sends: [PushSend] = []
            sends.reserveCapacity(capacity)
            sends.append(send)
            groups.append((service, sends))
        } else {
            unsendable.append(UnsendablePush(send: send, reason: OutcomeDisposition.notConfigured(token.platform)))
            return
        }
        sendCount += 1
    }

    /// Hands each service its devices. Returns what each service took (its ids, for `withdraw`); the
    /// devices a service set apart are added to ``unsendable``.
    mutating func submit(sentAt now: Date, to receiver: any PushOutcomeReceiver) -> [SubmittedSends] {
        var submitted: [SubmittedSends] = []
        submitted.reserveCapacity(groups.count)
        for (service, sends) in groups where !sends.isEmpty {
            let submission = service.prepared.submit(sends, sentAt: now, to: receiver)
            unsendable += submission.unsendable
            submitted.append(SubmittedSends(service: service.service, ids: submission.ids, count: submission.submitted))
        }
        return submitted
    }
}

/// What one service took of a batch: its transport's ids (for ``PushService/withdraw(_:)``) and how many.
struct SubmittedSends {
    let service: any PushService
    var ids: [UInt64]
    var count: Int
}

extension [SubmittedSends] {
    /// Adds `more` to the ids kept per service (a chunk keeps them to withdraw the unsent ones on a stop).
    mutating func merge(_ more: [SubmittedSends]) {
        for entry in more {
            if let index = firstIndex(where: { $0.service === entry.service }) {
                self[index].ids += entry.ids
                self[index].count += entry.count
            } else {
                append(entry)
            }
        }
    }

    /// Takes back from each service what it has not written yet. Returns how many.
    func withdraw() -> Int {
        reduce(0) { $0 + $1.service.withdraw($1.ids) }
    }
}
