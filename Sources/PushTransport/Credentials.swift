public import Foundation
public import NIOSSL
import SwiftASN1
import X509

/// Which certificate authorities may sign the server's certificate. Verification is always on.
public enum TrustRoots: Sendable {
    /// The system trust store.
    case system
    /// A PEM file of CA certificates (`--ca`): for a simulator or a TLS-terminating proxy.
    case caFile(String)
    case certificates([NIOSSLCertificate])
}

/// A TLS client certificate with its private key.
public struct ClientCertificate: Sendable {
    public let chain: [NIOSSLCertificate]
    public let key: NIOSSLPrivateKey

    public init(chain: [NIOSSLCertificate], key: NIOSSLPrivateKey) {
        self.chain = chain
        self.key = key
    }

    /// Whether `other` is the same chain with the same key (a reload that read the same files again
    /// changes nothing).
    public func isSame(as other: ClientCertificate) -> Bool {
        chain == other.chain && key == other.key
    }

    /// Loads PEM files. `keyPath` may be nil when the certificate file also holds the key (a
    /// combined PEM, as some tools export).
    public static func load(certificatePath: String, keyPath: String?) throws -> ClientCertificate {
        guard let certificateFile = FileManager.default.contents(atPath: certificatePath) else {
            throw TransportSetupError.unreadableFile(path: certificatePath, what: "client certificate (PEM)")
        }
        // NIOSSL's PEM readers stop at blocks of another kind, so a combined file is split by hand.
        let chain =
            (try? pemBlocks(in: certificateFile, labelled: "CERTIFICATE").map {
                try NIOSSLCertificate(bytes: Array($0.utf8), format: .pem)
            }) ?? []
        guard !chain.isEmpty else {
            throw TransportSetupError.unreadableFile(path: certificatePath, what: "client certificate (PEM)")
        }
        let keyFile = keyPath ?? certificatePath
        guard let keyData = keyPath == nil ? certificateFile : FileManager.default.contents(atPath: keyFile),
            let keyBlock = pemBlocks(in: keyData, labelled: "PRIVATE KEY").first,
            let key = try? NIOSSLPrivateKey(bytes: Array(keyBlock.utf8), format: .pem)
        else {
            throw TransportSetupError.unreadableFile(path: keyFile, what: "private key (unencrypted PEM)")
        }
        return ClientCertificate(chain: chain, key: key)
    }

    /// The PEM blocks whose label ends with `label` (`PRIVATE KEY` matches `EC PRIVATE KEY` and
    /// `RSA PRIVATE KEY` too), each with its BEGIN and END lines.
    static func pemBlocks(in data: Data, labelled label: String) -> [String] {
        // Tolerate blocks glued together without a newline (`...-----END X----------BEGIN Y-----`).
        let text = String(decoding: data, as: UTF8.self).replacingOccurrences(of: "-----BEGIN ", with: "\n-----BEGIN ")
        var blocks: [String] = []
        var current: [Substring]? = nil
        for line in text.split(omittingEmptySubsequences: true, whereSeparator: \.isNewline) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("-----BEGIN "), trimmed.hasSuffix(label + "-----") {
                current = [Substring(trimmed)]
            } else if trimmed.hasPrefix("-----END "), current != nil {
                current!.append(Substring(trimmed))
                blocks.append(current!.joined(separator: "\n") + "\n")
                current = nil
            } else if current != nil {
                current!.append(Substring(trimmed))
            }
        }
        return blocks
    }

    /// Loads a PKCS#12 bundle (`.p12`), as Keychain Access exports Apple's push certificates.
    public static func loadPKCS12(path: String, passphrase: String?) throws -> ClientCertificate {
        do {
            let bundle = try NIOSSLPKCS12Bundle(file: path, passphrase: passphrase.map { Array($0.utf8) } ?? [])
            return ClientCertificate(chain: bundle.certificateChain, key: bundle.privateKey)
        } catch {
            throw TransportSetupError.unreadableFile(path: path, what: "PKCS#12 bundle (wrong passphrase?)")
        }
    }

    /// The subject's UID attribute (OID 0.9.2342.19200300.100.1.1): Apple's push certificates carry
    /// the bundle id there, so it is the default topic.
    public var subjectUID: String? {
        guard let leaf = chain.first, let der = try? leaf.toDERBytes(),
            let certificate = try? Certificate(derEncoded: der)
        else { return nil }
        let uid: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]
        for rdn in certificate.subject {
            for attribute in rdn where attribute.type == uid {
                return String(describing: attribute.value)
            }
        }
        return nil
    }

    /// The leaf certificate's serial number (hex bytes), for logs.
    public var serialNumber: String? {
        guard let leaf = chain.first, let der = try? leaf.toDERBytes(),
            let certificate = try? Certificate(derEncoded: der)
        else { return nil }
        return certificate.serialNumber.description
    }

    /// When the leaf certificate stops being valid.
    public var notValidAfter: Date? {
        guard let leaf = chain.first, let der = try? leaf.toDERBytes(),
            let certificate = try? Certificate(derEncoded: der)
        else { return nil }
        return certificate.notValidAfter
    }
}

/// Errors a transport reports when it is set up wrongly. Safe to print: they name files, never keys.
public struct TransportSetupError: Error, Hashable, CustomStringConvertible {
    private enum Code: Hashable {
        case unreadableFile(path: String, what: String)
        case systemTrustRootsUnavailable
    }
    private let code: Code

    public static func unreadableFile(path: String, what: String) -> TransportSetupError {
        TransportSetupError(code: .unreadableFile(path: path, what: what))
    }

    /// No CA store where the platform keeps one (Debian: /etc/ssl/certs, from the ca-certificates package),
    /// so no server can be verified. Said in words: the TLS library's own error is an empty error stack.
    public static let systemTrustRootsUnavailable = TransportSetupError(code: .systemTrustRootsUnavailable)

    public var description: String {
        switch code {
        case .unreadableFile(let path, let what): "cannot read \(what) from \(path)"
        case .systemTrustRootsUnavailable:
            "the system's CA certificates cannot be loaded (no /etc/ssl/certs/ca-certificates.crt): install the "
                + "ca-certificates package, or name the CA that signs the server's certificate (app.NAME.ca, --ca)"
        }
    }
}
