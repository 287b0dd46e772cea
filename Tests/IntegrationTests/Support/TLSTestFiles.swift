import Foundation

/// Certificates for the HTTP API's TLS tests, made with the `openssl` command line (nothing of ours
/// signs them): a server CA with two server certificates for 127.0.0.1 (serials 1001 and 2002), a client
/// CA with one client certificate, and a stranger CA with a client certificate of its own.
struct TLSTestFiles {
    let directory: TemporaryDirectory

    var serverCA: String { directory.path("server-ca.pem") }
    var clientCA: String { directory.path("client-ca.pem") }
    var clientCertificate: String { directory.path("client.pem") }
    var clientKey: String { directory.path("client.key") }
    var strangerCertificate: String { directory.path("stranger.pem") }
    var strangerKey: String { directory.path("stranger.key") }
    /// The files the gateway is configured with; ``install(serial:)`` replaces them.
    var certificate: String { directory.path("api.pem") }
    var key: String { directory.path("api.key") }

    static func make() throws -> TLSTestFiles {
        let files = TLSTestFiles(directory: try TemporaryDirectory())
        try files.authority("server-ca")
        try files.authority("client-ca")
        try files.authority("stranger-ca")
        let server =
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
        try files.leaf("server-1001", ca: "server-ca", serial: "0x1001", extensions: server)
        try files.leaf("server-2002", ca: "server-ca", serial: "0x2002", extensions: server)
        let client = "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n"
        try files.leaf("client", ca: "client-ca", serial: "0x3003", extensions: client)
        try files.leaf("stranger", ca: "stranger-ca", serial: "0x4004", extensions: client)
        try files.install(serial: "1001")
        return files
    }

    /// Puts the server certificate with this serial (and its key) where the gateway reads them.
    func install(serial: String) throws {
        try replace(
            certificate,
            with: try Data(contentsOf: URL(fileURLWithPath: directory.path("server-\(serial).pem")))
        )
        try replace(key, with: try Data(contentsOf: URL(fileURLWithPath: directory.path("server-\(serial).key"))))
    }

    /// Replaces a file whole (write and rename), as a certificate renewal tool does.
    func replace(_ path: String, with data: Data) throws {
        try data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    func openssl(_ arguments: [String]) throws {
        let (status, output) = try ExternalTools.run("openssl", arguments, in: directory.url)
        guard status == 0 else {
            throw ExternalTools.ToolError("openssl \(arguments.prefix(2).joined(separator: " ")) failed: \(output)")
        }
    }

    private func authority(_ name: String) throws {
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            "\(name).key", "-out", "\(name).pem", "-days", "2", "-subj", "/CN=pushgate test \(name)",
        ])
    }

    private func leaf(_ name: String, ca: String, serial: String, extensions: String) throws {
        try openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "\(name).key",
            "-out", "\(name).csr", "-subj", "/CN=\(name)",
        ])
        try extensions.write(toFile: directory.path("\(name).cnf"), atomically: true, encoding: .utf8)
        try openssl([
            "x509", "-req", "-in", "\(name).csr", "-CA", "\(ca).pem", "-CAkey", "\(ca).key", "-set_serial", serial,
            "-out", "\(name).pem", "-days", "2", "-extfile", "\(name).cnf",
        ])
    }

    /// The serial number of the certificate a new TLS connection to 127.0.0.1:port is served, as
    /// `openssl x509 -serial` prints it (`1001`); nil when the handshake fails.
    func servedSerial(port: Int, extraArguments: [String] = []) async throws -> String? {
        let command =
            "openssl s_client -connect 127.0.0.1:\(port) -CAfile \(serverCA) -verify_return_error "
            + extraArguments.joined(separator: " ")
            + " </dev/null 2>/dev/null | openssl x509 -noout -serial"
        let (status, output) = try await ExternalTools.runOffPool("sh", ["-c", command])
        guard status == 0, let line = output.split(separator: "\n").first(where: { $0.hasPrefix("serial=") }) else {
            return nil
        }
        return String(line.dropFirst("serial=".count))
    }

    /// `curl` over TLS, trusting only the server CA: the exit status and the body (or curl's error).
    func curl(
        port: Int,
        path: String = "/healthz",
        _ arguments: [String] = []
    ) async throws -> (status: Int32, output: String) {
        try await ExternalTools.runOffPool(
            "curl",
            ["-sS", "--max-time", "20", "--cacert", serverCA] + arguments + ["https://127.0.0.1:\(port)\(path)"]
        )
    }
}
