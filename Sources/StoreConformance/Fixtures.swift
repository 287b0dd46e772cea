import Crypto
import Foundation
import PushgateCore

/// Shared test data and a minimal dispatcher that drives the ledger the way the real one must.
enum Fixture {
    static let app = Registration.defaultApp
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let instanceA = InstanceID("instance-a")
    static let instanceB = InstanceID("instance-b")
    static let lease = Duration.seconds(30)

    /// `start` plus whole seconds (exact in milliseconds, so stored times compare equal).
    static func at(_ seconds: Int) -> Date { start.addingTimeInterval(TimeInterval(seconds)) }

    /// A distinct 32-byte token per number.
    static func token(_ number: Int) -> DeviceToken {
        let hex = String(number, radix: 16)
        return try! DeviceToken(hex: String(repeating: "0", count: 64 - hex.count) + hex)
    }

    /// A distinct FCM registration token per number, shaped like Google's (`:` and `APA91b`).
    static func fcmToken(_ number: Int) -> DeviceToken {
        let digits = String(number)
        let padded = String(repeating: "0", count: max(0, 8 - digits.count)) + digits
        return try! DeviceToken(fcm: "dK3v_\(padded):APA91bH-" + String(repeating: "Qz7", count: 50))
    }

    /// An FCM token with the same text as the APNs ``token(_:)`` (64 hex digits are a valid FCM token):
    /// another device.
    static func fcmTwin(_ number: Int) -> DeviceToken { try! DeviceToken(fcm: token(number).value) }

    static func registration(_ number: Int, _ group: String, app: String = app, at seconds: Int = 0) -> Registration {
        Registration(app: app, token: token(number), group: group, at: at(seconds))
    }

    static func register(
        _ store: any PushStore,
        _ numbers: some Sequence<Int>,
        in group: String,
        at seconds: Int = 0
    )
        async throws
    {
        _ = try await store.register(batch: numbers.map { registration($0, group, at: seconds) })
    }

    /// Registers one device (of any platform) in `group` of the default app.
    static func register(
        _ store: any PushStore,
        _ token: DeviceToken,
        in group: String,
        at seconds: Int = 0
    )
        async throws -> RegistrationResult
    {
        try await store.register(Registration(app: app, token: token, group: group, at: at(seconds)))
    }

    /// Enqueues each request and checks that it reads back whole, and that the first one's service
    /// override (`override` picks FCM's or Web Push's) keeps its bytes unchanged.
    static func expectRequestsReadBack(
        _ store: any PushStore,
        _ requests: [NotificationRequest],
        override: (NotificationRequest) -> [UInt8]?,
        equals expected: [UInt8]
    ) async throws {
        for request in requests {
            _ = try await store.enqueue(request)
            try expectEqual(try await store.request(request.id), request, "request \(request.id) read back")
        }
        let first = try unwrap(try await store.request(requests[0].id), "request \(requests[0].id)")
        try expectEqual(override(first), expected, "the override's bytes, unchanged")
    }

    /// The failures of `id` read one a page, each page after the previous one's last token.
    static func failuresPagedOneByOne(_ store: any PushStore, of id: RequestID) async throws -> [DeviceToken] {
        var paged = [DeviceToken]()
        var after: DeviceToken? = nil
        while true {
            let page = try await store.failures(of: id, after: after, limit: 1)
            guard let last = page.last else { break }
            paged += page.map(\.token)
            after = last.token
        }
        return paged
    }

    /// Claims the next chunk and completes it in one page: `accepted` accepted, and `dead` failed for good
    /// with `reason` and `status` and invalidated, as the dispatcher records a service's "gone" answer.
    static func completeNextChunk(
        _ store: any PushStore,
        accepted: Int,
        dead: DeviceToken,
        reason: String,
        status: Int,
        at seconds: Int
    ) async throws {
        let chunk = try unwrap(
            try await store.claimChunk(owner: instanceA, now: at(seconds), leaseDuration: lease, chunkSize: 10),
            "claim a chunk"
        )
        _ = try await store.recordProgress(
            ChunkProgress(
                chunk: chunk,
                through: chunk.through,
                accepted: accepted,
                failures: [FailureEntry(token: dead, reason: reason, status: status, at: at(seconds))],
                invalidations: [
                    DeviceInvalidation(token: dead, reason: APNsReason(rawValue: reason), appleTimestamp: nil)
                ],
                completesChunk: true
            ),
            owner: instanceA,
            now: at(seconds),
            leaseDuration: lease
        )
    }

    static func requestID(_ name: String) -> RequestID { try! RequestID(name) }

    static func request(
        _ name: String,
        groups: [String] = [],
        devices: [DeviceToken] = [],
        expiration: Expiration = .immediately,
        at seconds: Int = 0,
        app: String = app,
        priority: Priority = .immediate
    ) -> NotificationRequest {
        NotificationRequest(
            id: requestID(name),
            app: app,
            groups: groups,
            devices: devices,
            pushType: .alert,
            priority: priority,
            expiration: expiration,
            payload: Payload.alert("hello"),
            createdAt: at(seconds)
        )
    }

    /// What the simulated APNs answers for one device.
    enum Answer {
        case accept
        case reject(String, status: Int)
        case retry(String, nextAttemptAt: Date)
    }

    /// Claims and completes every chunk there is, answering each target with `answer`, recording outcomes
    /// a page at a time. Returns the tokens sent to, in order.
    @discardableResult
    static func deliverAll(
        _ store: any PushStore,
        owner: InstanceID = instanceA,
        now: Date = at(1),
        chunkSize: Int = 100,
        pageSize: Int = 50,
        answer: (DeviceToken) -> Answer = { _ in .accept }
    ) async throws -> [DeviceToken] {
        var sent = [DeviceToken]()
        while let chunk = try await store.claimChunk(owner: owner, now: now, leaseDuration: lease, chunkSize: chunkSize)
        {
            sent += try await deliver(chunk, store: store, owner: owner, now: now, pageSize: pageSize, answer: answer)
        }
        return sent
    }

    /// Sends every target of one chunk from its progress on and completes it.
    static func deliver(
        _ chunk: WorkChunk,
        store: any PushStore,
        owner: InstanceID = instanceA,
        now: Date,
        pageSize: Int = 50,
        maximumPages: Int = .max,
        answer: (DeviceToken) -> Answer = { _ in .accept }
    ) async throws -> [DeviceToken] {
        var sent = [DeviceToken]()
        var cursor = chunk.progress
        var pages = 0
        while pages < maximumPages {
            let page = try await store.targets(of: chunk, after: cursor, limit: pageSize)
            try expect(
                page.targets.count <= pageSize,
                "a page holds at most its limit (\(page.targets.count) > \(pageSize))"
            )
            try expect(
                page.targets.allSatisfy { $0.cursor > cursor && $0.cursor <= chunk.through },
                "page targets lie within (\(cursor), \(chunk.through)] of \(chunk)"
            )
            try expect(
                page.skipped.allSatisfy { $0 > cursor && $0 <= page.scannedThrough },
                "skipped cursors lie within (\(cursor), \(page.scannedThrough)] of \(chunk)"
            )
            // As the dispatcher records them: the split by service of what was accepted and skipped.
            var progress = ChunkProgress(
                chunk: chunk,
                through: page.scannedThrough,
                completesChunk: page.isEnd,
                skipped: page.skipped.count,
                skippedByService: page.skippedByService(first: page.skipped.count)
            )
            for target in page.targets {
                sent.append(target.token)
                switch answer(target.token) {
                case .accept:
                    progress.accepted += 1
                    progress.acceptedByService[target.token.platform] += 1
                    progress.lastAPNsID = "00000000-0000-4000-8000-\(target.token.hex.suffix(12))"
                case .reject(let reason, let status):
                    progress.failures.append(FailureEntry(token: target.token, reason: reason, status: status, at: now))
                case .retry(let reason, let next):
                    progress.retries.append(
                        RetryEntry(token: target.token, attempt: 1, nextAttemptAt: next, reason: reason)
                    )
                }
            }
            let result = try await store.recordProgress(progress, owner: owner, now: now, leaseDuration: lease)
            try expect(result != .leaseLost, "progress of a held lease is recorded (\(chunk))")
            cursor = page.scannedThrough
            pages += 1
            if page.isEnd {
                try expectEqual(result, .chunkCompleted, "the last page completes the chunk")
                break
            }
        }
        return sent
    }
}

extension Fixture {
    /// A browser's subscription: endpoint `number` on a push service, with keys of generation `keys` (a
    /// browser that subscribes again keeps its endpoint and gets new keys). Deterministic: the P-256 key
    /// comes from the numbers.
    static func subscription(_ number: Int, keys: Int = 0) -> DeviceToken {
        var scalar = [UInt8](repeating: 0, count: 32)
        scalar[0] = 1
        scalar[30] = UInt8(truncatingIfNeeded: keys)
        scalar[31] = UInt8(truncatingIfNeeded: number)
        scalar[29] = UInt8(truncatingIfNeeded: number >> 8)
        let publicKey = try! P256.KeyAgreement.PrivateKey(rawRepresentation: scalar).publicKey.x963Representation
        let auth = [UInt8](repeating: UInt8(truncatingIfNeeded: keys &+ 1), count: 16)
        let subscription = try! WebPushSubscription(
            endpoint: "https://push.example.net/wpush/v2/browser-\(number)",
            p256dh: Base64URL.encode(Array(publicKey)),
            auth: Base64URL.encode(auth)
        )
        return DeviceToken(webPush: subscription)
    }

    /// Subscription `number` named by its endpoint alone, as the HTTP device routes name it.
    static func endpointOnly(_ number: Int) -> DeviceToken {
        try! DeviceToken(webPushEndpoint: String(subscription(number).webPushEndpoint))
    }
}
