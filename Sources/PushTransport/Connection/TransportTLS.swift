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
        let configuration = try makeConfiguration(
            trustRoots: trustRoots,
            certificate: certificate,
            applicationProtocols: applicationProtocols
        )
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            // The system store is loaded here, when the context is made: without one, BoringSSL says only
            // "unknownError([])", which names neither the cause nor the fix. The same set-up with no trust
            // roots at all tells whether the store was the cause (and not, say, the client certificate).
            guard case .system = trustRoots else { throw error }
            var withoutStore = configuration
            withoutStore.trustRoots = .certificates([])
            guard (try? NIOSSLContext(configuration: withoutStore)) != nil else { throw error }
            throw TransportSetupError.systemTrustRootsUnavailable
        }
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
