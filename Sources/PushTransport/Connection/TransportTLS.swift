package import NIOSSL

/// The one client TLS set-up of every transport: TLS 1.2 or later, the server always verified against
/// `trustRoots`, the client certificate when there is one, and the plug-in's ALPN protocols (`h2` for
/// HTTP/2; none for the legacy binary protocol, which is raw bytes over TLS).
package enum TransportTLS {
    package static func makeContext(
        trustRoots: TrustRoots,
        certificate: ClientCertificate?,
        applicationProtocols: [String]
    ) throws -> NIOSSLContext {
        try NIOSSLContext(
            configuration: makeConfiguration(
                trustRoots: trustRoots,
                certificate: certificate,
                applicationProtocols: applicationProtocols
            )
        )
    }

    /// The same set-up as a configuration, for a client that builds its own context (AsyncHTTPClient).
    package static func makeConfiguration(
        trustRoots: TrustRoots,
        certificate: ClientCertificate?,
        applicationProtocols: [String]
    ) throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = applicationProtocols
        tls.certificateVerification = .fullVerification
        switch trustRoots {
        case .system:
            tls.trustRoots = .default
        case .caFile(let path):
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(path))
            } catch {
                throw TransportSetupError.unreadableFile(path: path, what: "CA certificate file")
            }
        case .certificates(let certificates):
            tls.trustRoots = .certificates(certificates)
        }
        if let certificate {
            tls.certificateChain = certificate.chain.map { .certificate($0) }
            tls.privateKey = .privateKey(certificate.key)
        }
        return tls
    }

    /// A TLS or socket error in words safe to log.
    package static func describe(_ error: any Error) -> String {
        if let error = error as? NIOSSLError { return "TLS: \(error)" }
        return "\(error)"
    }
}
