import APNsClient
import NIOSSL

/// The client TLS context of both legacy services: the app's certificate, the server always verified.
/// No ALPN: the legacy protocol is raw bytes over TLS.
enum LegacyTLS {
    static func makeContext(
        certificate: APNsClient.ClientCertificate,
        trustRoots: APNsClient.TrustRoots
    ) throws -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.certificateVerification = .fullVerification
        switch trustRoots {
        case .system:
            tls.trustRoots = .default
        case .caFile(let path):
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(path))
            } catch {
                throw APNsClientError.unreadableFile(path: path, what: "CA certificate file")
            }
        case .certificates(let certificates):
            tls.trustRoots = .certificates(certificates)
        }
        tls.certificateChain = certificate.chain.map { .certificate($0) }
        tls.privateKey = .privateKey(certificate.key)
        return try NIOSSLContext(configuration: tls)
    }

    /// A TLS or socket error in words safe to log.
    static func describe(_ error: any Error) -> String {
        if let error = error as? NIOSSLError { return "TLS: \(error)" }
        return "\(error)"
    }
}
