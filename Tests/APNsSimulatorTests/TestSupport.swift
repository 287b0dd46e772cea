import APNsSimulator
import Crypto
import Foundation
import PushgateCore

/// A device token of 32 bytes in hex, distinct per `seed`.
func deviceToken(_ seed: Int = 1) -> String {
    String(repeating: String(format: "%02x", seed % 256), count: 32)
}

let bundleID = "com.example.app"

/// The headers of a valid alert push to `bundleID`.
func alertHeaders(topic: String = bundleID, extra: [(String, String)] = []) -> [(String, String)] {
    [("apns-topic", topic), ("apns-push-type", "alert"), ("apns-priority", "10")] + extra
}

/// Runs `body` with a simulator and a connected probe.
func withSimulatorAndProbe<Result: Sendable>(
    _ configuration: APNsSimulator.Configuration = .init(),
    clientCertificate: SimulatorCertificateAuthority.IssuedCertificate? = nil,
    _ body: (RunningAPNsSimulator, SimulatorProbe) async throws -> Result
) async throws -> Result {
    try await APNsSimulator.withRunning(configuration) { simulator in
        let probe = try await SimulatorProbe.connect(
            port: simulator.port,
            trustRootsPEM: simulator.caCertificatePEM,
            clientCertificatePEM: clientCertificate?.certificatePEM,
            clientPrivateKeyPEM: clientCertificate?.privateKeyPEM
        )
        do {
            let result = try await body(simulator, probe)
            await probe.close()
            return result
        } catch {
            await probe.close()
            throw error
        }
    }
}

/// Mints ES256 provider tokens the way Apple documents them; written here, independently of the
/// gateway's JWT code.
struct TestTokenSigner {
    let keyID: String
    let teamID: String
    let privateKey: P256.Signing.PrivateKey

    init(keyID: String = "ABC123DEFG", teamID: String = "TEAM123456", privateKey: P256.Signing.PrivateKey = .init()) {
        self.keyID = keyID
        self.teamID = teamID
        self.privateKey = privateKey
    }

    var simulatorKey: ProviderTokenKey {
        ProviderTokenKey(keyID: self.keyID, teamID: self.teamID, publicKey: self.privateKey.publicKey)
    }

    func token(
        issuedAt: Date,
        keyID: String? = nil,
        teamID: String? = nil,
        algorithm: String = "ES256"
    ) throws -> String {
        let header = #"{"alg":"\#(algorithm)","kid":"\#(keyID ?? self.keyID)"}"#
        let claims = #"{"iss":"\#(teamID ?? self.teamID)","iat":\#(Int64(issuedAt.timeIntervalSince1970))}"#
        let input = Self.base64URL(Data(header.utf8)) + "." + Self.base64URL(Data(claims.utf8))
        let signature = try self.privateKey.signature(for: Data(input.utf8))
        return input + "." + Self.base64URL(signature.rawRepresentation)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// Runs an executable and collects its output.
struct ProcessResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

func run(_ executable: String, _ arguments: [String]) async throws -> ProcessResult {
    let process = SpawnedProcess()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    // Read both pipes to the end off the cooperative pool, then reap the process.
    let (stdout, stderr) = await withCheckedContinuation { (continuation: CheckedContinuation<(Data, Data), Never>) in
        DispatchQueue.global().async {
            let group = DispatchGroup()
            nonisolated(unsafe) var errData = Data()
            group.enter()
            DispatchQueue.global().async {
                errData = err.fileHandleForReading.readToEndRetryingInterrupts()
                group.leave()
            }
            let outData = out.fileHandleForReading.readToEndRetryingInterrupts()
            group.wait()
            process.waitUntilExit()
            continuation.resume(returning: (outData, errData))
        }
    }
    return ProcessResult(
        status: process.terminationStatus,
        stdout: String(decoding: stdout, as: UTF8.self),
        stderr: String(decoding: stderr, as: UTF8.self)
    )
}

func executableExists(_ path: String) -> Bool {
    FileManager.default.isExecutableFile(atPath: path)
}

/// A fresh temporary directory.
func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("simulator-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
