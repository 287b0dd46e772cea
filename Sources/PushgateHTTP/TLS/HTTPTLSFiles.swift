public import Foundation
public import NIOSSL
import X509

/// The API's TLS files: the certificate chain and key it serves, and optionally the CA its clients'
/// certificates must chain to (mTLS). ``load(now:)`` reads and checks them all, and is what start-up and
/// every reload run: one reading, one set of checks.
public struct HTTPTLSFiles: Sendable, Hashable {
    /// Which of the files a problem is about (`http.tls.` and this is its configuration key).
    public enum Role: String, Sendable, Hashable {
        case certificate
        case key
        case clientCA
    }

    /// The certificate chain (PEM), leaf first.
    public var certificate: String
    /// The leaf's private key (unencrypted PEM: PKCS#8, SEC1 or PKCS#1).
    public var key: String
    /// CA certificates (PEM). Set: every client must present a certificate that chains to one of them.
    public var clientCA: String?

    public init(certificate: String, key: String, clientCA: String? = nil) {
        self.certificate = certificate
        self.key = key
        self.clientCA = clientCA
    }

    /// Reads the files and builds the server's TLS context: TLS 1.2 or later, the chain and key (which
    /// must belong together), client certificates required and verified when `clientCA` is set. Throws the
    /// first problem, naming the file's role and path, never key material.
    public func load(now: Date) throws(HTTPTLSError) -> HTTPTLSIdentity {
        let chain = try Self.certificates(in: certificate, role: .certificate)
        let leaf: Certificate
        do {
            leaf = try Certificate(derEncoded: chain[0].toDERBytes())
        } catch {
            throw HTTPTLSError(.certificate, path: certificate, "the first certificate does not parse as X.509")
        }
        if leaf.notValidAfter < now {
            throw HTTPTLSError(
                .certificate,
                path: certificate,
                "the certificate expired on \(leaf.notValidAfter.formatted(.iso8601))"
            )
        }

        guard let keyData = FileManager.default.contents(atPath: key) else {
            throw HTTPTLSError(.key, path: key, "cannot read the file")
        }
        let privateKey: NIOSSLPrivateKey
        let publicKey: Certificate.PublicKey
        do {
            let block = try Self.privateKeyBlock(in: keyData)
            privateKey = try NIOSSLPrivateKey(bytes: Array(block.utf8), format: .pem)
            publicKey = try Certificate.PrivateKey(pemEncoded: block).publicKey
        } catch {
            throw HTTPTLSError(.key, path: key, "holds no unencrypted PEM private key")
        }
        // A key from another certificate would only fail in every client's handshake: say so now.
        guard publicKey == leaf.publicKey else {
            throw HTTPTLSError(.key, path: key, "the key does not belong to the certificate in \(certificate)")
        }

        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) },
            privateKey: .privateKey(privateKey)
        )
        configuration.minimumTLSVersion = .tlsv12
        if let clientCA {
            let authorities = try Self.certificates(in: clientCA, role: .clientCA)
            // A server asks for a client certificate and refuses the handshake without one; there is no
            // host name to check on a client's certificate.
            configuration.certificateVerification = .noHostnameVerification
            configuration.trustRoots = .certificates(authorities)
            configuration.sendCANameList = true
        }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw HTTPTLSError(.certificate, path: certificate, "the certificate and key are refused by TLS: \(error)")
        }
        return HTTPTLSIdentity(
            context: context,
            serialNumber: chain[0].serialNumber.map { String($0, radix: 16, uppercase: true) }
                .map { $0.count == 1 ? "0" + $0 : $0 }.joined(),
            notValidAfter: leaf.notValidAfter
        )
    }

    /// Every certificate of a PEM file, at least one.
    private static func certificates(in path: String, role: Role) throws(HTTPTLSError) -> [NIOSSLCertificate] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw HTTPTLSError(role, path: path, "cannot read the file")
        }
        let certificates = (try? NIOSSLCertificate.fromPEMBytes(Array(data))) ?? []
        guard !certificates.isEmpty else { throw HTTPTLSError(role, path: path, "holds no PEM certificate") }
        return certificates
    }

    /// The first `-----BEGIN ... PRIVATE KEY-----` block (a key file may carry its certificate too). An
    /// `ENCRYPTED PRIVATE KEY` is not one: the daemon has nobody to ask for a passphrase.
    private static func privateKeyBlock(in data: Data) throws -> String {
        struct NoKey: Error {}
        var block: [Substring]? = nil
        for line in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if block == nil {
                if trimmed.hasPrefix("-----BEGIN "), trimmed.hasSuffix("PRIVATE KEY-----"),
                    !trimmed.contains("ENCRYPTED")
                {
                    block = [Substring(trimmed)]
                }
            } else {
                block!.append(Substring(trimmed))
                if trimmed.hasPrefix("-----END ") { return block!.joined(separator: "\n") + "\n" }
            }
        }
        throw NoKey()
    }
}

/// What one reading of the TLS files gave: the context new connections use, and what identifies the
/// certificate in the log.
public struct HTTPTLSIdentity: Sendable {
    public let context: NIOSSLContext
    /// The leaf certificate's serial number in upper-case hex (`openssl x509 -serial` prints the same).
    public let serialNumber: String
    public let notValidAfter: Date
}

/// A TLS file the API cannot serve with: which one (``HTTPTLSFiles/Role``), its path and what is wrong.
/// Never carries key material.
public struct HTTPTLSError: Error, Hashable, Sendable, CustomStringConvertible {
    public let role: HTTPTLSFiles.Role
    public let path: String
    public let message: String

    init(_ role: HTTPTLSFiles.Role, path: String, _ message: String) {
        self.role = role
        self.path = path
        self.message = message
    }

    /// The configuration key of the file: `http.tls.certificate`, `http.tls.key`, `http.tls.clientCA`.
    public var key: String { "http.tls.\(role.rawValue)" }

    public var description: String { "\(path): \(message)" }
}
