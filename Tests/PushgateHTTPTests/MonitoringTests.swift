import CoreMetrics
import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import PushgateHTTP
import Synchronization
import Testing

@Suite("HTTP API: readiness, metrics and the OpenAPI document")
struct MonitoringTests {
    @Test("/readyz is 503 apns_unavailable while no APNs connection is possible, 200 once one is")
    func readyzFollowsAPNs() async throws {
        let reachable = Flag(false)
        let monitoring = HTTPAPI.Monitoring(apnsReachable: { reachable.value })
        try await withRouterClient(monitoring: monitoring) { client, _ in
            let down = try await client.send(.get, "/readyz")
            #expect(down.status == .serviceUnavailable)
            #expect(down.error.code == "apns_unavailable")
            reachable.value = true
            #expect(try await client.send(.get, "/readyz").status == .ok)
        }
    }

    @Test("/readyz is 503 fcm_unavailable while APNs is reachable but no FCM connection is possible, 200 once one is")
    func readyzFollowsFCM() async throws {
        let reachable = Flag(false)
        let monitoring = HTTPAPI.Monitoring(apnsReachable: { true }, fcmReachable: { reachable.value })
        try await withRouterClient(monitoring: monitoring) { client, _ in
            let down = try await client.send(.get, "/readyz")
            #expect(down.status == .serviceUnavailable)
            #expect(down.error.code == "fcm_unavailable")
            reachable.value = true
            #expect(try await client.send(.get, "/readyz").status == .ok)
        }
    }

    @Test("without a metrics exposition, /metrics is 404 not_found")
    func metricsOff() async throws {
        try await withRouterClient { client, _ in
            let response = try await client.send(.get, "/metrics")
            #expect(response.status == .notFound)
            #expect(response.error.code == "not_found")
        }
    }

    @Test("requests are counted by method, route template and status; labels carry no raw path")
    func requestMetrics() async throws {
        let factory = RecordingMetricsFactory()
        try await withRouterClient(monitoring: .init(metricsFactory: factory)) { client, _ in
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenA)")
            _ = try await client.send(.put, "/v1/apps/default/groups/news/devices/\(tokenB)")
            _ = try await client.send(.get, "/v1/apps/default/devices/\(tokenC)")
            _ = try await client.send(.get, "/v2/\(tokenA)")
            _ = try await client.send(.post, "/v1/notifications", json: "{")
        }
        let counts = factory.counters
        #expect(
            counts[
                "pushgate_http_requests_total{method=PUT,route=/v1/apps/{app}/groups/{group}/devices/{token},status=204}"
            ] == 2
        )
        #expect(counts["pushgate_http_requests_total{method=GET,route=/v1/apps/{app}/devices/{token},status=404}"] == 1)
        #expect(counts["pushgate_http_requests_total{method=GET,route=unmatched,status=404}"] == 1)
        #expect(counts["pushgate_http_requests_total{method=POST,route=/v1/notifications,status=400}"] == 1)
        #expect(counts.keys.allSatisfy { !$0.contains(tokenA) && !$0.contains(tokenC) && !$0.contains("news") })
        #expect(
            factory.timerCount(
                "pushgate_http_request_duration_seconds{route=/v1/apps/{app}/groups/{group}/devices/{token}}"
            ) == 2
        )
    }

    @Test("the OpenAPI document describes every route the server has, and only those")
    func documentMatchesRoutes() async throws {
        try await withRouterClient { client, _ in
            let text = String(buffer: try await client.send(.get, "/openapi.yaml").body)
            let documented = Set(
                text.split(separator: "\n").filter { $0.hasPrefix("  /") && $0.hasSuffix(":") }.map {
                    String($0.dropFirst(2).dropLast())
                }
            )
            #expect(
                documented == [
                    "/v1/apps/{app}/groups/{group}/devices/{token}", "/v1/apps/{app}/groups/{group}/devices",
                    "/v1/apps/{app}/devices/{token}", "/v1/groups/{group}/devices/{token}",
                    "/v1/groups/{group}/devices",
                    "/v1/devices/{token}", "/v1/notifications", "/v1/notifications/{id}", "/healthz", "/readyz",
                    "/metrics",
                    "/openapi.yaml",
                ]
            )
            // Every error code the server uses is in the document's enum.
            for code in [
                "malformed_json", "duplicate_key", "not_an_object", "unknown_field", "wrong_type", "missing_field",
                "body_too_large",
                "unknown_app", "unknown_group", "invalid_token", "apns_unavailable", "method_not_allowed",
            ] {
                #expect(text.contains("- \(code)\n"), "\(code)")
            }
        }
    }
}

/// A mutable boolean shared with a closure.
final class Flag: Sendable {
    private let state: Mutex<Bool>
    init(_ value: Bool) { state = Mutex(value) }
    var value: Bool {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}

/// A metrics factory that keeps counter totals and timer observation counts by name and labels
/// (`name{k=v,...}`), for assertions.
final class RecordingMetricsFactory: MetricsFactory, Sendable {
    private let counterValues = Mutex<[String: Int64]>([:])
    private let timerValues = Mutex<[String: Int]>([:])

    var counters: [String: Int64] { counterValues.withLock { $0 } }
    func timerCount(_ key: String) -> Int { timerValues.withLock { $0[key] ?? 0 } }

    static func key(_ label: String, _ dimensions: [(String, String)]) -> String {
        dimensions.isEmpty ? label : "\(label){\(dimensions.map { "\($0.0)=\($0.1)" }.joined(separator: ","))}"
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        CounterBox(key: Self.key(label, dimensions), factory: self)
    }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        NOOPMetricsHandler.instance
    }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        TimerBox(key: Self.key(label, dimensions), factory: self)
    }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}

    final class CounterBox: CounterHandler, Sendable {
        let key: String
        let factory: RecordingMetricsFactory
        init(key: String, factory: RecordingMetricsFactory) {
            self.key = key
            self.factory = factory
        }
        func increment(by amount: Int64) { factory.counterValues.withLock { $0[key, default: 0] += amount } }
        func reset() { factory.counterValues.withLock { $0[key] = 0 } }
    }

    final class TimerBox: TimerHandler, Sendable {
        let key: String
        let factory: RecordingMetricsFactory
        init(key: String, factory: RecordingMetricsFactory) {
            self.key = key
            self.factory = factory
        }
        func recordNanoseconds(_ duration: Int64) { factory.timerValues.withLock { $0[key, default: 0] += 1 } }
    }
}
