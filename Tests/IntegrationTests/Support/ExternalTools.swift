import Foundation
import PushgateCore

#if canImport(Glibc)
import Glibc
#endif

/// Helpers for tests that run programs nobody here wrote (openssl, nghttpd, curl, h2load).
enum ExternalTools {
    static func path(of tool: String) -> String? {
        for directory in ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/bin", "/sbin"] {
            let candidate = "\(directory)/\(tool)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    static func isInstalled(_ tool: String) -> Bool { path(of: tool) != nil }

    /// Runs a tool to completion and returns its exit status and combined output.
    @discardableResult
    /// ``run(_:_:in:)`` on a Dispatch thread: the wait for the tool must not hold one of Swift's cooperative
    /// threads (two on a 2-core machine), which a server under test in this process needs to answer it.
    static func runOffPool(
        _ tool: String,
        _ arguments: [String],
        in directory: URL? = nil
    ) async throws -> (status: Int32, output: String) {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try run(tool, arguments, in: directory) })
            }
        }
    }

    static func run(
        _ tool: String,
        _ arguments: [String],
        in directory: URL? = nil
    ) throws -> (status: Int32, output: String) {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: path(of: tool) ?? tool)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readToEndRetryingInterrupts()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// A UDP port that was free a moment ago (the kernel picked it for a UDP socket). A free TCP port says
    /// nothing of UDP: another test's UDP socket may hold the same number.
    static func freeUDPPort() -> Int { freePort(socketType: Int32(SOCK_DGRAM.rawValue)) }

    /// A port that was free a moment ago (the kernel picked it for us).
    static func freeTCPPort() -> Int { freePort(socketType: Int32(SOCK_STREAM.rawValue)) }

    /// The port the kernel picks for a socket of `socketType` bound to 127.0.0.1:0.
    private static func freePort(socketType: Int32) -> Int {
        let fd = socket(AF_INET, socketType, 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Waits until something accepts TCP connections on 127.0.0.1:port. Polls, because a foreign
    /// program gives us no other readiness signal; bounded by `timeout`.
    static func waitForListener(port: Int, timeout: TimeInterval = 20) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            close(fd)
            if result == 0 { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ToolError("nothing listened on port \(port) within \(timeout) s")
    }

    struct ToolError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

/// A temporary directory removed when the value goes away.
final class TemporaryDirectory: @unchecked Sendable {
    // @unchecked: immutable after init.
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A certificate authority and server certificate made with the `openssl` command line, so that
/// tests of the client against foreign servers share no code with our simulator.
struct OpenSSLServerCertificate {
    let caPath: String
    let certificatePath: String
    let keyPath: String

    static func make(in directory: TemporaryDirectory) throws -> OpenSSLServerCertificate {
        let d = directory
        func openssl(_ arguments: [String]) throws {
            let (status, output) = try ExternalTools.run("openssl", arguments, in: d.url)
            guard status == 0 else {
                throw ExternalTools.ToolError("openssl \(arguments.first ?? "") failed: \(output)")
            }
        }
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=pushgate test CA",
        ])
        try openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "server.key",
            "-out", "server.csr", "-subj", "/CN=localhost",
        ])
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
            .write(toFile: d.path("ext.cnf"), atomically: true, encoding: .utf8)
        try openssl([
            "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
            "server.pem", "-days", "2", "-extfile", "ext.cnf",
        ])
        return OpenSSLServerCertificate(
            caPath: d.path("ca.pem"),
            certificatePath: d.path("server.pem"),
            keyPath: d.path("server.key")
        )
    }
}

/// A child process that is terminated when the test is done with it.
final class ChildProcess: @unchecked Sendable {
    // @unchecked: `process` is only mutated in init and terminate, which tests call sequentially.
    let process = SpawnedProcess()

    init(_ tool: String, _ arguments: [String], in directory: URL? = nil) throws {
        process.executableURL = URL(fileURLWithPath: ExternalTools.path(of: tool) ?? tool)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// Sends SIGKILL (nghttpd ignores SIGTERM here). Does not wait: `Process.waitUntilExit()` can
    /// hang on Linux's Foundation (seen here), and Foundation reaps the child by itself.
    func terminate() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
    }

    deinit { terminate() }
}
