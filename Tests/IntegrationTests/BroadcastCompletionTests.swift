import Foundation
import Logging
import PushgateCore
import PushgateSQLite
import Synchronization
import Testing

@testable import PushgateDispatch

/// A broadcast whose targets end exactly at a chunk boundary is finished by the claim that finds nothing
/// left to cut; when its chunks were all answered before that claim (two apps' broadcasts take turns at
/// the claims), its `notification request done` line must still come (`pushgate-bench twoapps` waits
/// for it, and with the in-flight window it never came for app a).
@Suite("Dispatcher: a broadcast finished by a claim is reported done", .timeLimit(.minutes(2)))
struct BroadcastCompletionTests {
    /// The ids of the requests whose `notification request done` line was logged.
    final class CompletionLines: Sendable {
        private let ids = Mutex<[String]>([])

        var done: [String] { ids.withLock { $0 } }

        func logger() -> Logger { Logger(label: "dispatch") { _ in Handler(lines: self) } }

        private struct Handler: LogHandler {
            let lines: CompletionLines
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .info
            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }
            func log(event: LogEvent) {
                guard event.message.description == "notification request done",
                    let id = event.metadata?["push.request_id"]
                else { return }
                lines.ids.withLock { $0.append("\(id)") }
            }
        }
    }

    @Test(
        "two apps' broadcasts of whole chunks, the first app's last chunk answered before the claim that finds its cut done: both are logged done"
    )
    func broadcastFinishedByAClaimIsLoggedDone() async throws {
        let directory = try TemporaryDirectory()
        let sqlite = try SQLiteStore(path: directory.path("completion.db"))
        defer { try? sqlite.close() }
        let store = FaultInjectingStore(base: sqlite)
        let now = Date()
        let token = DispatcherPipelineTests.token
        // 40 devices each: two chunks of 20, the second ending at the app's last member (its cut cannot
        // tell that nothing follows, so a later claim marks it done).
        _ = try await store.register(
            batch: (1...40).map { Registration(app: "a", token: token($0), group: "all", at: now) }
        )
        _ = try await store.register(
            batch: (101...140).map { Registration(app: "b", token: token($0), group: "all", at: now) }
        )
        // One transport for both apps, room for 10 unanswered: the apps' chunks wait for each other's answers.
        let transport = HeldAnswersTransport(capacity: 10)
        var configuration = Dispatcher.Configuration(instanceID: InstanceID("completion"))
        configuration.chunkSize = 20
        configuration.pageSize = 5
        configuration.idleInterval = .milliseconds(50)
        configuration.shutdownGracePeriod = .milliseconds(100)
        let lines = CompletionLines()
        let topic = try Topic("com.example.completion")
        let dispatcher = Dispatcher(
            store: store,
            routes: [
                "a": DeliveryRoute(transport: transport, topic: topic),
                "b": DeliveryRoute(transport: transport, topic: topic),
            ],
            configuration: configuration,
            logger: lines.logger()
        )
        let payload = try Payload(jsonString: #"{"aps":{"alert":"hi"}}"#)
        let (a, b) = (try RequestID("broadcast-a"), try RequestID("broadcast-b"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await dispatcher.run() }
            _ = try await dispatcher.submit(
                NotificationRequest(id: a, app: "a", groups: ["all"], payload: payload, createdAt: Date())
            )
            try await eventually("a's first chunk fills the room") { transport.submitted == 10 }
            _ = try await dispatcher.submit(
                NotificationRequest(id: b, app: "b", groups: ["all"], payload: payload, createdAt: Date())
            )
            // Answered in rounds, each recorded before the next: a chunk's record, and so its request's
            // completion check, comes before the claim that its answers' room lets happen.
            let finished: @Sendable () async throws -> Bool = {
                [try await store.report(a)?.state, try await store.report(b)?.state] == [.done, .done]
            }
            var answered = 0
            repeat {
                answered += transport.held
                transport.answerAll()
                let expected = answered
                try await eventually("the answers recorded, and more sent or both requests finished") {
                    let recorded = try await [a, b].asyncReduce { try await store.report($0)?.accepted ?? 0 }
                    guard recorded == expected else { return false }
                    if transport.held > 0 { return true }
                    return try await finished()
                }
            } while !(try await finished())
            #expect(transport.submitted == 80, "every device once")
            try await eventually("both done lines", timeout: .seconds(10)) {
                Set(lines.done) == ["\(a)", "\(b)"]
            }
            #expect(lines.done.count == 2, "one line each")
            group.cancelAll()
        }
    }
}

extension Array {
    /// The sum of `value` over the elements, each awaited in turn.
    fileprivate func asyncReduce(_ value: (Element) async throws -> Int) async rethrows -> Int {
        var sum = 0
        for element in self { sum += try await value(element) }
        return sum
    }
}
