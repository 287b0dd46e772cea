import APNsHTTP2
import APNsSimulator
import Crypto
import Foundation
import Logging
import Prometheus
import PushgateConfig
import PushgateCore
import PushgateDispatch
import PushgateGateway
import PushgateHTTP
import PushgateUDP
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Metrics: a known scenario, scraped from GET /metrics")
struct MetricsScenarioTests {
    static func token(_ index: Int) -> String { String(format: "%064x", 0xfee000 + index) }

    @Test("4 devices notified (3 accepted, 1 Unregistered) and 2 rejected datagrams: the counters say exactly that")
    func knownScenario() async throws {
        try await MetricsGatewayFixture.with { context in
            let http = context.http
            for index in 1...4 {
                #expect(
                    try await http.send("PUT", "/v1/apps/default/groups/fans/devices/\(Self.token(index))").status
                        == 204
                )
            }
            context.simulator.markUnregistered(Self.token(4), at: Date().addingTimeInterval(3600))
            let submitted = try await http.send(
                "POST",
                "/v1/notifications",
                body: #"{"groups": ["fans"], "type": "normal", "payload": {"aps": {"alert": "Goal"}}}"#
            )
            #expect(submitted.status == 202)
            let id = try #require(submitted.json["id"] as? String)
            context.notification.send(#"{"groups": ["fans"], "payload": "#)  // malformed_json
            context.registration.send(#"{"device": "not-hex", "group": "fans"}"#)  // invalid_token
            try await eventually("request done") {
                try await http.send("GET", "/v1/notifications/\(id)").json["state"] as? String == "done"
            }
            let labels = #"app="default",push_type="alert""#
            let accepted =
                #"pushgate_notifications_total{\#(labels),reason="none",result="accepted",service="apns",status="200"}"#
            // Both datagrams' rejections: the two ports are read apart, and on a loaded machine either may be
            // counted after the request is done.
            try await eventually("outcomes and rejections counted") {
                let metrics = try await context.scrape()
                return metrics.value(accepted) == 3
                    && metrics.value(
                        #"pushgate_udp_datagrams_rejected_total{port="registration",reason="invalid_token"}"#
                    ) == 1
                    && metrics.value(
                        #"pushgate_udp_datagrams_rejected_total{port="notification",reason="malformed_json"}"#
                    ) == 1
            }

            let metrics = try await context.scrape()
            #expect(metrics.value(accepted) == 3)
            #expect(
                metrics.value(
                    #"pushgate_notifications_total{\#(labels),reason="Unregistered",result="failed",service="apns","#
                        + #"status="410"}"#
                ) == 1
            )
            #expect(metrics.sum("pushgate_notifications_total") == 4, "no other outcome")
            #expect(
                metrics.value(
                    #"pushgate_devices_invalidated_total{app="default",reason="Unregistered",service="apns"}"#
                ) == 1
            )
            #expect(metrics.value(#"pushgate_notification_requests_total{app="default"}"#) == 1)
            #expect(metrics.value(#"pushgate_build_info{version="\#(BuildInfo.version)"}"#) == 1)
            #expect(metrics.value(#"pushgate_notification_targets_total{app="default"}"#) == 4)
            #expect(metrics.value(#"pushgate_udp_datagrams_received_total{port="notification"}"#) == 1)
            #expect(metrics.value(#"pushgate_udp_datagrams_received_total{port="registration"}"#) == 1)
            #expect(
                metrics.value(#"pushgate_udp_datagrams_rejected_total{port="notification",reason="malformed_json"}"#)
                    == 1
            )
            #expect(
                metrics.value(#"pushgate_udp_datagrams_rejected_total{port="registration",reason="invalid_token"}"#)
                    == 1
            )
            #expect(metrics.sum("pushgate_udp_datagrams_rejected_total") == 2)
            #expect(metrics.sum("pushgate_udp_datagrams_applied_total") == 0)
            #expect(
                metrics.value(
                    #"pushgate_http_requests_total{method="PUT",route="/v1/apps/{app}/groups/{group}/devices/{token}",status="204"}"#
                ) == 4
            )
            #expect(
                metrics.value(#"pushgate_http_requests_total{method="POST",route="/v1/notifications",status="202"}"#)
                    == 1
            )
            #expect((metrics.value(#"pushgate_apns_connections_opened_total{app="default"}"#) ?? 0) >= 1)
            #expect(metrics.value(#"pushgate_apns_connection_failures_total{app="default"}"#) == 0)
            #expect(metrics.value(#"pushgate_apns_provider_token_refreshes_total{app="default"}"#) == 1)
            // Sampled histograms (one answer in 16, the first always): 4 answers give one observation each.
            #expect(metrics.value(#"pushgate_apns_round_trip_seconds_count{app="default"}"#) == 1)
            #expect(metrics.value(#"pushgate_notification_latency_seconds_count{app="default"}"#) == 1)
            #expect(metrics.value(#"pushgate_apns_round_trip_seconds_bucket{app="default",le="+Inf"}"#) == 1)
            #expect(metrics.value(#"pushgate_apns_requests_queued{app="default"}"#) != nil)
            #expect(metrics.value(#"pushgate_apns_streams_in_use{app="default"}"#) != nil)
            #expect(metrics.value(#"pushgate_apns_connections{app="default"}"#) != nil)
            // No label value carries a device token, an apns-id or a raw path.
            for index in 1...4 { #expect(!metrics.text.contains(Self.token(index))) }
            #expect(!metrics.text.contains("fans"))
            #expect(!metrics.text.contains(id))
        }
    }

    @Test("/readyz is 503 apns_unavailable once connecting to APNs fails")
    func readinessFollowsAPNs() async throws {
        try await MetricsGatewayFixture.with(apnsPortOverride: ExternalTools.freeTCPPort()) { context in
            #expect(try await context.http.send("GET", "/readyz").status == 200, "no attempt yet: possible")
            #expect(try await context.http.send("PUT", "/v1/groups/g/devices/\(Self.token(1))").status == 204)
            #expect(
                try await context.http.send("POST", "/v1/notifications", body: #"{"groups": ["g"], "payload": {}}"#)
                    .status == 202
            )
            try await eventually("connect failure counted") {
                (try await context.scrape().value(#"pushgate_apns_connection_failures_total{app="default"}"#) ?? 0) >= 1
            }
            let ready = try await context.http.send("GET", "/readyz")
            #expect(ready.status == 503)
            #expect((ready.json["error"] as? [String: Any])?["code"] as? String == "apns_unavailable")
        }
    }
}

@Suite("Metrics: labels stay bounded")
struct MetricsLabelTests {
    @Test("past 64 distinct UDP rejection reasons, the rest count as other")
    func udpReasonsAreCapped() throws {
        let registry = PrometheusCollectorRegistry()
        let metrics = UDPIngressMetrics(factory: PrometheusMetricsFactory(registry: registry))
        for index in 0..<70 { metrics.datagramRejected(on: .notification, reason: "reason_\(index)") }
        metrics.datagramRejected(on: .notification, reason: "reason_0")
        metrics.datagramRejected(on: .registration, reason: "reason_0")
        let text = try PrometheusText(parsing: registry.emitToString())
        #expect(text.value(#"pushgate_udp_datagrams_rejected_total{port="notification",reason="reason_0"}"#) == 2)
        #expect(text.value(#"pushgate_udp_datagrams_rejected_total{port="notification",reason="reason_63"}"#) == 1)
        #expect(text.value(#"pushgate_udp_datagrams_rejected_total{port="notification",reason="reason_64"}"#) == nil)
        #expect(text.value(#"pushgate_udp_datagrams_rejected_total{port="notification",reason="other"}"#) == 6)
        #expect(text.value(#"pushgate_udp_datagrams_rejected_total{port="registration",reason="other"}"#) == 1)
        #expect(text.sum("pushgate_udp_datagrams_rejected_total") == 72)
    }
}

/// The gateway with its HTTP API on port 0, delivering to an in-process simulator (or to a closed port).
struct MetricsGatewayFixture {
    struct Context: Sendable {
        var simulator: RunningAPNsSimulator
        var http: HTTPTestClient
        var registration: UDPSender
        var notification: UDPSender

        func scrape() async throws -> PrometheusText {
            let response = try await http.send("GET", "/metrics")
            #expect(response.status == 200)
            #expect(response.contentType?.hasPrefix("text/plain") == true)
            return try PrometheusText(parsing: response.text)
        }
    }

    static func with(
        apnsPortOverride: Int? = nil,
        fcm: GatewayConfiguration.App.FCM? = nil,
        _ body: @escaping @Sendable (Context) async throws -> Void
    ) async throws {
        try await GatewayFixture.withSimulator { simulator, configuration in
            var configuration = configuration
            configuration.http.port = 0
            if let apnsPortOverride { configuration.apps[0].apnsHost = "127.0.0.1:\(apnsPortOverride)" }
            configuration.apps[0].fcm = fcm
            try await GatewayFixture.run(configuration) { running, _ in
                try await eventually("HTTP API listening") { running.httpPort() != nil }
                let context = Context(
                    simulator: simulator,
                    http: HTTPTestClient(port: running.httpPort()!),
                    registration: try UDPSender(port: running.udp.registrationPort),
                    notification: try UDPSender(port: running.udp.notificationPort)
                )
                try await body(context)
            }
        }
    }
}

/// Plain HTTP/1.1 requests to the gateway on loopback.
struct HTTPTestClient: Sendable {
    let port: Int

    struct Response: Sendable {
        var status: Int
        var contentType: String?
        var body: Data
        var text: String { String(decoding: body, as: UTF8.self) }
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
    }

    func send(
        _ method: String,
        _ path: String,
        body: String? = nil,
        headers: [String: String] = [:]
    ) async throws -> Response {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        return Response(
            status: http.statusCode,
            contentType: http.value(forHTTPHeaderField: "Content-Type"),
            body: data
        )
    }
}

/// Prometheus text exposition (0.0.4), parsed strictly enough that a malformed line fails the test:
/// `# HELP`/`# TYPE` comments, then `name{label="value",...} number` samples. Series are keyed with
/// their labels sorted by name.
struct PrometheusText {
    let text: String
    private(set) var samples: [String: Double] = [:]

    struct Malformed: Error, CustomStringConvertible {
        var line: String
        var description: String { "not a Prometheus sample: \(line)" }
    }

    init(parsing text: String) throws {
        self.text = text
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("#") {
                guard line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") else {
                    throw Malformed(line: String(line))
                }
                continue
            }
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                throw Malformed(line: String(line))
            }
            let series = line[..<space]
            let name: Substring
            var labels: [(String, String)] = []
            if let brace = series.firstIndex(of: "{") {
                guard series.last == "}" else { throw Malformed(line: String(line)) }
                name = series[..<brace]
                var rest = series[series.index(after: brace)..<series.index(before: series.endIndex)]
                while !rest.isEmpty {
                    guard let equals = rest.firstIndex(of: "="), rest[rest.index(after: equals)] == "\"" else {
                        throw Malformed(line: String(line))
                    }
                    let labelName = String(rest[..<equals])
                    var cursor = rest.index(equals, offsetBy: 2)
                    var labelValue = ""
                    while cursor < rest.endIndex, rest[cursor] != "\"" {
                        if rest[cursor] == "\\" { cursor = rest.index(after: cursor) }
                        guard cursor < rest.endIndex else { throw Malformed(line: String(line)) }
                        labelValue.append(rest[cursor])
                        cursor = rest.index(after: cursor)
                    }
                    guard cursor < rest.endIndex else { throw Malformed(line: String(line)) }
                    labels.append((labelName, labelValue))
                    rest = rest[rest.index(after: cursor)...]
                    if rest.first == "," { rest = rest.dropFirst() }
                }
            } else {
                name = series
            }
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" }) else {
                throw Malformed(line: String(line))
            }
            let key =
                labels.isEmpty
                ? String(name)
                : "\(name){\(labels.sorted { $0.0 < $1.0 }.map { "\($0.0)=\"\($0.1)\"" }.joined(separator: ","))}"
            samples[key] = value
        }
    }

    func value(_ series: String) -> Double? { samples[series] }

    /// The sum over every series of a metric.
    func sum(_ name: String) -> Double {
        samples.filter { $0.key == name || $0.key.hasPrefix(name + "{") }.values.reduce(0, +)
    }
}
