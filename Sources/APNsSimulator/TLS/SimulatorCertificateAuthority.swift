import Crypto
public import Foundation
import SwiftASN1
import X509

/// A throwaway certificate authority for the simulator: it makes the CA (P-256), the server
/// certificate for `localhost`, `127.0.0.1` and `::1`, and client certificates shaped like
/// Apple's push certificates (subject UID = the topic / bundle ID).
///
/// ```swift
/// let authority = try SimulatorCertificateAuthority()
/// let client = try authority.issueClientCertificate(topic: "com.example.app")
/// var configuration = APNsSimulator.Configuration()
/// configuration.tls = .authority(authority)
/// configuration.clientCertificateAuthorityPEM = authority.certificatePEM
/// ```
public struct SimulatorCertificateAuthority: Sendable {
    /// The OID of the `UID` (userId) subject attribute: 0.9.2342.19200300.100.1.1.
    static let userIDAttribute: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]

    /// A certificate with its private key, both PEM.
    public struct IssuedCertificate: Sendable {
        public var certificatePEM: String
        public var privateKeyPEM: String

        /// Writes the certificate and the key (mode 0600) to files.
        public func write(certificateTo certificatePath: String, privateKeyTo keyPath: String) throws {
            try Data(self.certificatePEM.utf8).write(to: URL(fileURLWithPath: certificatePath))
            try SimulatorCertificateAuthority.writePrivate(self.privateKeyPEM, to: keyPath)
        }
    }

    private let certificate: Certificate
    private let privateKey: P256.Signing.PrivateKey

    /// The CA certificate, PEM: what clients trust (`--ca`, `curl --cacert`).
    public let certificatePEM: String
    /// The CA's private key, PEM (a throwaway test key).
    public let privateKeyPEM: String

    /// Generates a new CA, valid from an hour ago for ten years.
    public init(commonName: String = "pushgate APNs simulator CA") throws {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName(commonName) }
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(10 * 365 * 86_400),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: .init(key.publicKey))
            },
            issuerPrivateKey: .init(key)
        )
        try self.init(certificate: certificate, privateKey: key)
    }

    /// Loads an existing CA (for example one a previous run wrote).
    public init(certificatePEM: String, privateKeyPEM: String) throws {
        let certificate = try Certificate(pemEncoded: certificatePEM)
        let key = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        try self.init(certificate: certificate, privateKey: key)
    }

    private init(certificate: Certificate, privateKey: P256.Signing.PrivateKey) throws {
        self.certificate = certificate
        self.privateKey = privateKey
        self.certificatePEM = try certificate.serializeAsPEM().pemString
        self.privateKeyPEM = privateKey.pemRepresentation
    }

    /// A server certificate for the given DNS names and IP addresses (default: `localhost`,
    /// `127.0.0.1`, `::1`), valid from an hour ago for a year.
    public func issueServerCertificate(
        dnsNames: [String] = ["localhost"],
        ipAddresses: [String] = ["127.0.0.1", "::1"]
    ) throws -> IssuedCertificate {
        var names: [GeneralName] = dnsNames.map { .dnsName($0) }
        for address in ipAddresses {
            guard let bytes = Self.ipAddressBytes(address) else {
                throw SimulatorError.invalidConfiguration(
                    key: "ipAddresses",
                    problem: "\(address) is not an IP address"
                )
            }
            names.append(.ipAddress(ASN1OctetString(contentBytes: bytes[...])))
        }
        let subject = try DistinguishedName { CommonName(dnsNames.first ?? ipAddresses.first ?? "localhost") }
        return try self.issue(
            subject: subject,
            extensions: [
                try Certificate.Extension(SubjectAlternativeNames(names), critical: false),
                try Certificate.Extension(try ExtendedKeyUsage([.serverAuth]), critical: false),
            ]
        )
    }

    /// A client certificate like Apple's push certificates: subject `UID=<topic>, CN=<common name>`.
    /// A simulator that trusts this CA (`clientCertificateAuthorityPEM`) allows the topic and its
    /// push-type suffixes on connections that present it.
    public func issueClientCertificate(
        topic: String,
        commonName: String? = nil,
        validFor validity: TimeInterval = 365 * 86_400
    ) throws -> IssuedCertificate {
        let subject = DistinguishedName([
            RelativeDistinguishedName(.init(type: Self.userIDAttribute, utf8String: topic)),
            RelativeDistinguishedName(
                .init(type: .RDNAttributeType.commonName, utf8String: commonName ?? "Apple Push Services: \(topic)")
            ),
        ])
        return try self.issue(
            subject: subject,
            validity: validity,
            extensions: [try Certificate.Extension(try ExtendedKeyUsage([.clientAuth]), critical: false)]
        )
    }

    /// Writes the CA certificate (PEM) to `path`.
    public func writeCertificate(to path: String) throws {
        try Data(self.certificatePEM.utf8).write(to: URL(fileURLWithPath: path))
    }

    private func issue(
        subject: DistinguishedName,
        validity: TimeInterval = 365 * 86_400,
        extensions: [Certificate.Extension]
    ) throws -> IssuedCertificate {
        let key = P256.Signing.PrivateKey()
        let now = Date()
        var allExtensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true, keyEncipherment: false))
            SubjectKeyIdentifier(hash: .init(key.publicKey))
            AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: self.certificate.publicKey).keyIdentifier)
        }
        for ext in extensions {
            try allExtensions.append(ext)
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(validity),
            issuer: self.certificate.subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: allExtensions,
            issuerPrivateKey: .init(self.privateKey)
        )
        return IssuedCertificate(
            certificatePEM: try certificate.serializeAsPEM().pemString,
            privateKeyPEM: key.pemRepresentation
        )
    }

    static func writePrivate(_ text: String, to path: String) throws {
        let url = URL(fileURLWithPath: path)
        try Data(text.utf8).write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
    }

    static func ipAddressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }
}
