import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import PushgateCore
import Testing
import WebPush
import WebPushSimulator

/// An HTTP client (HTTP/2 where ALPN offers it, else HTTP/1.1) trusting only the simulator's CA, shut
/// down after `body`.
func withClient<Result: Sendable>(
    trusting simulator: RunningWebPushSimulator,
    _ body: (HTTPClient) async throws -> Result
) async throws -> Result {
    var tls = TLSConfiguration.makeClientConfiguration()
    tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(simulator.caCertificatePEM.utf8)))
    let client = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: HTTPClient.Configuration(tlsConfiguration: tls)
    )
    do {
        let result = try await body(client)
        try await client.shutdown()
        return result
    } catch {
        try? await client.shutdown()
        throw error
    }
}

struct Answer {
    var status: Int
    var headers: HTTPHeaders
    var body: String
}

/// POSTs `body` to `url` with `headers`; nil when the connection closed without an answer.
func post(
    _ client: HTTPClient,
    _ url: String,
    headers: [(String, String)] = [],
    body: [UInt8]
) async throws
    -> Answer
{
    var request = HTTPClientRequest(url: url)
    request.method = .POST
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    request.body = .bytes(ByteBuffer(bytes: body))
    let response = try await client.execute(request, timeout: .seconds(30))
    let bytes = try await response.body.collect(upTo: 1 << 20)
    return Answer(status: Int(response.status.code), headers: response.headers, body: String(buffer: bytes))
}

/// The control API: a JSON request, a JSON object back.
func control(
    _ client: HTTPClient,
    _ simulator: RunningWebPushSimulator,
    _ method: HTTPMethod,
    _ path: String,
    _ json: String? = nil
) async throws -> [String: Any] {
    var request = HTTPClientRequest(url: "http://127.0.0.1:\(simulator.controlPort!)\(path)")
    request.method = method
    if let json { request.body = .bytes(ByteBuffer(string: json)) }
    let response = try await client.execute(request, timeout: .seconds(30))
    let bytes = try await response.body.collect(upTo: 1 << 22)
    return (try JSONSerialization.jsonObject(with: Data(bytes.readableBytesView)) as? [String: Any]) ?? [:]
}

/// The control API: a JSON request, the status and the body as text.
func controlText(
    _ client: HTTPClient,
    _ simulator: RunningWebPushSimulator,
    _ path: String,
    _ json: String
) async throws -> (status: Int, body: String) {
    var request = HTTPClientRequest(url: "http://127.0.0.1:\(simulator.controlPort!)\(path)")
    request.method = .POST
    request.body = .bytes(ByteBuffer(string: json))
    let response = try await client.execute(request, timeout: .seconds(30))
    let bytes = try await response.body.collect(upTo: 1 << 22)
    return (Int(response.status.code), String(buffer: bytes))
}

/// What the gateway's Web Push code makes for one subscription: the headers, VAPID and the encrypted body.
struct Sender {
    var key = VAPIDKey.generate()
    var subject = try! VAPIDSubject("mailto:ops@example.com")
    var cache = VAPIDTokenCache()

    mutating func message(
        _ plaintext: String,
        to simulated: WebPushSimulatorSubscription,
        expiration: Expiration = .immediately,
        pushType: PushType = .alert,
        priority: Priority = .immediate,
        key collapse: String? = nil,
        now: Date = Date()
    ) throws -> (url: String, headers: [(String, String)], body: [UInt8]) {
        try message(
            plaintext,
            to: WebPushSubscription(jsonBytes: Array(simulated.json.utf8)),
            expiration: expiration,
            pushType: pushType,
            priority: priority,
            key: collapse,
            now: now
        )
    }

    mutating func message(
        _ plaintext: String,
        to subscription: WebPushSubscription,
        expiration: Expiration = .immediately,
        pushType: PushType = .alert,
        priority: Priority = .immediate,
        key collapse: String? = nil,
        now: Date = Date()
    ) throws -> (url: String, headers: [(String, String)], body: [UInt8]) {
        let headers = WebPushHeaders(
            expiration: expiration,
            pushType: pushType,
            priority: priority,
            collapseID: try collapse.map { try CollapseID($0) },
            sentAt: now
        )
        let authorization = cache.authorization(for: subscription.origin, now: now, key: key, subject: subject)
        let body = try WebPushEncryption.encrypt(Array(plaintext.utf8), for: subscription)
        return (
            subscription.endpoint, [("authorization", authorization)] + headers.fields.map { ($0.name, $0.value) },
            body
        )
    }
}

/// Whether `python3` can import every module named.
func pythonHas(_ modules: [String]) -> Bool {
    (try? run("python3", ["-c", modules.map { "import \($0)" }.joined(separator: "; ")]).status) == 0
}

/// Runs the Python checks when the modules are there, and always under CI (where a missing module must
/// fail the run, not skip it: .ci/run installs them).
func pythonCheck(_ modules: [String]) -> Bool {
    ProcessInfo.processInfo.environment["CI"] != nil || pythonHas(modules)
}

let webPushPythonMissing = Comment(
    rawValue: "skipped: needs python3 with http_ece, py_vapid and pywebpush (pip install http-ece py-vapid pywebpush)"
)

/// Runs a program to completion and returns its exit status and output.
func run(
    _ executable: String,
    _ arguments: [String],
    environment: [String: String] = [:]
) throws
    -> (status: Int32, stdout: String, stderr: String)
{
    let process = SpawnedProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [executable] + arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let stdout = out.fileHandleForReading.readToEndRetryingInterrupts()
    let stderr = err.fileHandleForReading.readToEndRetryingInterrupts()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
}
