import Foundation
import NIOSSL

/// Turns the configuration's TLS choices into an `NIOSSLContext` and the CA file to publish.
struct TLSSetup {
    let sslContext: NIOSSLContext
    let caCertificatePEM: String?
    let caCertificatePath: String?
    let authority: SimulatorCertificateAuthority?
    private let temporaryDirectory: String?

    static func make(_ configuration: APNsSimulator.Configuration) throws -> TLSSetup {
        var authority: SimulatorCertificateAuthority?
        let chainPEM: String
        let keyPEM: String
        switch configuration.tls {
        case .generated:
            let generated = try SimulatorCertificateAuthority()
            authority = generated
            let server = try generated.issueServerCertificate()
            chainPEM = server.certificatePEM
            keyPEM = server.privateKeyPEM
        case .authority(let given):
            authority = given
            let server = try given.issueServerCertificate()
            chainPEM = server.certificatePEM
            keyPEM = server.privateKeyPEM
        case .pem(let chain, let key):
            chainPEM = chain
            keyPEM = key
        case .files(let chainPath, let keyPath):
            chainPEM = try Self.read(chainPath, key: "tls-cert")
            keyPEM = try Self.read(keyPath, key: "tls-key")
        }

        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        do {
            chain = try NIOSSLCertificate.fromPEMBytes(Array(chainPEM.utf8))
            key = try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem)
        } catch {
            throw SimulatorError.invalidConfiguration(
                key: "tls",
                problem: "certificate or key is not usable PEM: \(error)"
            )
        }
        guard !chain.isEmpty else {
            throw SimulatorError.invalidConfiguration(key: "tls", problem: "no certificate in the chain")
        }

        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) },
            privateKey: .privateKey(key)
        )
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        if let clientCAPEM = configuration.clientCertificateAuthorityPEM {
            let roots: [NIOSSLCertificate]
            do {
                roots = try NIOSSLCertificate.fromPEMBytes(Array(clientCAPEM.utf8))
            } catch {
                throw SimulatorError.invalidConfiguration(key: "client-ca", problem: "not PEM certificates: \(error)")
            }
            guard !roots.isEmpty else {
                throw SimulatorError.invalidConfiguration(key: "client-ca", problem: "no certificate found")
            }
            tls.trustRoots = .certificates(roots)
            // With token keys too, token clients connect without a certificate; a certificate,
            // when presented, must still chain to the client CA.
            tls.certificateVerification =
                configuration.tokenKeys.isEmpty ? .noHostnameVerification : .optionalVerification
        } else {
            tls.certificateVerification = .none
        }
        let sslContext: NIOSSLContext
        do {
            sslContext = try NIOSSLContext(configuration: tls)
        } catch {
            throw SimulatorError.invalidConfiguration(key: "tls", problem: "\(error)")
        }

        var caPath: String?
        var temporaryDirectory: String?
        if let authority {
            if let requested = configuration.caCertificateOutputPath {
                caPath = requested
            } else {
                let directory = FileManager.default.temporaryDirectory
                    .appendingPathComponent("pushgate-simulator-\(UUID().uuidString)").path
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                temporaryDirectory = directory
                caPath = directory + "/ca.pem"
            }
            do {
                try authority.writeCertificate(to: caPath!)
            } catch {
                throw SimulatorError.invalidConfiguration(key: "ca-out", problem: "cannot write \(caPath!): \(error)")
            }
        }
        return TLSSetup(
            sslContext: sslContext,
            caCertificatePEM: authority?.certificatePEM,
            caCertificatePath: caPath,
            authority: authority,
            temporaryDirectory: temporaryDirectory
        )
    }

    func removeTemporaryFiles() {
        if let temporaryDirectory {
            try? FileManager.default.removeItem(atPath: temporaryDirectory)
        }
    }

    private static func read(_ path: String, key: String) throws -> String {
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw SimulatorError.invalidConfiguration(
                key: key,
                problem: "cannot read \(path): \(error.localizedDescription)"
            )
        }
    }
}
