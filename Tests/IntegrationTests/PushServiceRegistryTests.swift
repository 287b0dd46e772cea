import APNsTransport
import Foundation
import Logging
import PushTransport
import PushgateCore
import PushgateDispatch
import PushgateSQLite
import Synchronization
import Testing

/// A stand-in service, written only against `PushService`: it answers each device with the verdict
/// scripted for it, and sets apart the devices scripted as unsendable. It counts what the dispatcher asked.
final class ScriptedPushService: PushService {
    let platform: PushPlatform
    let inFlightCapacity = 100
    var transportID: ObjectIdentifier { ObjectIdentifier(self) }
    private let script: [DeviceToken: PushOutcome?]
    private let counts = Mutex<(prepared: Int, submitted: Int)>((0, 0))

    /// `script`: the outcome of each device; nil sets it apart as unsendable (`standin_unsendable`).
    init(platform: PushPlatform, script: [DeviceToken: PushOutcome?]) {
        self.platform = platform
        self.script = script
    }

    var prepared: Int { counts.withLock { $0.prepared } }
    var submitted: Int { counts.withLock { $0.submitted } }

    func prepare(_ request: NotificationRequest, logger: Logger) throws -> any PreparedPush {
        counts.withLock { $0.prepared += 1 }
        return Prepared(service: self)
    }

    func withdraw(_ ids: [UInt64]) -> Int { 0 }

    func alarmMessage(reason: String) -> String { "the stand-in refused the app's configuration" }

    struct Prepared: PreparedPush {
        let service: ScriptedPushService

        func submit(_ sends: [PushSend], sentAt now: Date, to receiver: any PushOutcomeReceiver) -> PushSubmission {
            var unsendable: [UnsendablePush] = []
            var answers: [(PushSend, PushOutcome)] = []
            for send in sends {
                guard let outcome = service.script[send.token] ?? nil else {
                    unsendable.append(UnsendablePush(send: send, reason: "standin_unsendable"))
                    continue
                }
                answers.append((send, outcome))
            }
            service.counts.withLock { $0.submitted += answers.count }
            for (send, outcome) in answers { receiver.receive(outcome, token: send.token, tag: send.tag) }
            return PushSubmission(ids: [], submitted: answers.count, unsendable: unsendable)
        }
    }
}

/// The dispatcher knows a service only through `PushService` and the registry: a stand-in registered for
/// an app's `fcm` devices, next to APNs, gets them and nothing else, and its outcomes are recorded by their
/// verdict alone.
@Suite("Dispatcher: a service plugs in through PushService and the app's registry", .timeLimit(.minutes(5)))
struct PushServiceRegistryTests {
    static func token(_ number: Int) -> DeviceToken {
        try! DeviceToken(fcm: String(format: "registry-test:APA91b-%032d", number))
    }

    static func outcome(_ verdict: PushOutcome.Verdict, reason: String, status: Int?) -> PushOutcome {
        PushOutcome(
            service: .fcm,
            verdict: verdict,
            outcomeClass: verdict == .delivered ? .accepted : .rejected,
            status: status,
            reason: reason,
            metricsReason: reason.isEmpty ? "none" : reason
        )
    }

    @Test("each verdict is recorded as such; unsendable devices fail at once; APNs devices stay on APNs")
    func verdictsRecorded() async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteStore(path: directory.path("registry.db"))
        defer { try? store.close() }
        let now = Date()
        let apnsToken = try DeviceToken(hex: String(repeating: "ab", count: 32))
        var delivered = Self.outcome(.delivered, reason: "", status: 200)
        delivered.acceptedID = "standin-1"
        let script: [DeviceToken: PushOutcome?] = [
            Self.token(0): delivered,
            Self.token(1): Self.outcome(.invalidate(reason: .unregistered, at: nil), reason: "GONE", status: 404),
            Self.token(2): Self.outcome(.failed, reason: "TOO_BIG", status: 413),
            Self.token(3): Self.outcome(.configurationAlarm(held: false), reason: "REFUSED", status: 403),
            Self.token(4): nil,
        ]
        var registrations = [Registration(token: apnsToken, group: "mixed", at: now)]
        for number in 0..<5 { registrations.append(Registration(token: Self.token(number), group: "mixed", at: now)) }
        _ = try await store.register(batch: registrations)
        let standIn = ScriptedPushService(platform: .fcm, script: script)
        let apns = RecordingAPNsTransport()
        var configuration = Dispatcher.Configuration(instanceID: InstanceID("registry"))
        configuration.idleInterval = .milliseconds(20)
        configuration.shutdownGracePeriod = .milliseconds(100)
        let route = DeliveryRoute(services: [
            APNsPushService(transport: apns, topic: try Topic("com.example.registry")), standIn,
        ])
        let dispatcher = Dispatcher(
            store: store,
            routes: [Registration.defaultApp: route],
            configuration: configuration,
            logger: TestLogger.make("registry")
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await dispatcher.run() }
            let id = try RequestID("registry-verdicts")
            _ = try await dispatcher.submit(
                NotificationRequest(
                    id: id,
                    groups: ["mixed"],
                    payload: Payload(jsonString: #"{"aps":{"alert":"hi"}}"#),
                    createdAt: now
                )
            )
            try await eventually("request done") { try await store.report(id)?.state == .done }
            let report = try #require(try await store.report(id))
            #expect(report.accepted == 2)
            #expect(
                report.failedByReason == ["GONE": 1, "TOO_BIG": 1, "REFUSED": 1, "standin_unsendable": 1]
            )
            #expect(apns.sent == [apnsToken])
            #expect(standIn.prepared == 1, "prepared once per request")
            #expect(standIn.submitted == 4)
            let gone = try await store.device(app: Registration.defaultApp, token: Self.token(1))
            #expect(gone?.invalidReason == .unregistered)
            for number in [0, 2, 3, 4] {
                let kept = try await store.device(app: Registration.defaultApp, token: Self.token(number))
                #expect(kept?.invalidatedAt == nil, "device \(number) is not pruned")
            }
            group.cancelAll()
        }
    }

    @Test("a route registers one service per platform; a platform without one has none")
    func oneServicePerPlatform() throws {
        let standIn = ScriptedPushService(platform: .fcm, script: [:])
        let route = DeliveryRoute(services: [standIn])
        #expect(route.service(for: .fcm) === standIn)
        #expect(route.service(for: .apns) == nil)
    }
}
