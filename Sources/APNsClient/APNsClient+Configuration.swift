public import Foundation
public import NIOCore
public import NIOSSL
public import PushgateCore
import SwiftASN1
import X509

extension APNsClient {
    /// Where the client connects: Apple's hosts, or any `HOST:PORT` (a simulator, a proxy).
    public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// Apple's host for the environment, on 443 or (the C pushd's `-p`) 2197.
        public static func apple(_ environment: APNsEnvironment, alternativePort: Bool = false) -> Endpoint {
            Endpoint(host: environment.host, port: alternativePort ? 2197 : 443)
        }

        /// Parses `HOST:PORT`, `[IPv6]:PORT`, or `HOST` (port 443).
        public init(parsing text: String) throws(ValidationError) {
            func fail() -> ValidationError {
                ValidationError(code: .init("invalid_host"), field: "apns-host", message: "expected HOST:PORT, got \"\(text)\"")
            }
            var host = Substring(text)
            var port = 443
            if host.hasPrefix("[") {
                guard let close = host.firstIndex(of: "]") else { throw fail() }
                let rest = host[host.index(after: close)...]
                host = host[host.index(after: host.startIndex)..<close]
                if !rest.isEmpty {
                    guard rest.hasPrefix(":"), let value = Int(rest.dropFirst()) else { throw fail() }
                    port = value
                }
            } else if let colon = host.lastIndex(of: ":"), host.filter({ $0 == ":" }).count == 1 {
                guard let value = Int(host[host.index(after: colon)...]) else { throw fail() }
                port = value
                host = host[..<colon]
            }
            guard !host.isEmpty, (1...65535).contains(port) else { throw fail() }
            self.init(host: String(host), port: port)
        }

        /// True for an IPv4 or IPv6 literal: such a host gets no SNI and is verified against the
        /// certificate's IP address SANs.
        public var isIPAddress: Bool {
            (try? SocketAddress(ipAddress: host, port: port)) != nil
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// How the client proves who it is to APNs.
    public enum Authentication: Sendable {
        /// A TLS client certificate (Apple's push certificate) and its key.
        case certificate(ClientCertificate)
        /// Provider tokens (ES256 JWTs from a `.p8` key).
        case token(any APNsProviderTokenSource)
    }

    /// Which certificate authorities may sign the server's certificate. Verification is always on.
    public enum TrustRoots: Sendable {
        /// The system trust store.
        case system
        /// A PEM file of CA certificates (`--ca`): for a simulator or a TLS-terminating proxy.
        case caFile(String)
        case certificates([NIOSSLCertificate])
    }

    public struct Configuration: Sendable {
        public var endpoint: Endpoint
        public var authentication: Authentication
        public var trustRoots: TrustRoots = .system
        /// Upper bound on connections; more are opened only while every open one is full.
        public var maximumConnections: Int = 8
        /// Our own cap on concurrent streams per connection (nil: whatever the server allows). APNs
        /// allows 1,000 or more, but NIOHTTP2's per-stream bookkeeping grows with open streams
        /// (measured: about a third more CPU per notification at 1,000 than at 100), so the client
        /// prefers more connections with about 100 streams each.
        public var maximumStreamsPerConnection: Int? = 100
        /// The C pushd's `-r`: new requests per second per connection (nil: no limit). Under sustained
        /// load the pool opens more connections, up to `maximumConnections`.
        public var maximumNotificationsPerSecondPerConnection: Int? = nil
        /// No request waits longer than this for its answer, queued time included.
        public var requestTimeout: TimeAmount = .seconds(30)
        public var connectTimeout: TimeAmount = .seconds(10)
        /// PING after this much silence (the C pushd's `-t`, default 60 minutes; nil disables).
        public var pingInterval: TimeAmount? = .minutes(60)
        public var pingTimeout: TimeAmount = .seconds(20)
        /// Close a connection after this long without requests (the C pushd's `-i`, default 24 hours; nil disables).
        public var idleTimeout: TimeAmount? = .hours(24)
        public var reconnectBaseDelay: TimeAmount = .milliseconds(100)
        public var reconnectMaximumDelay: TimeAmount = .seconds(30)
        /// Resends of a request APNs never processed (GOAWAY above last stream id, REFUSED_STREAM).
        public var maximumUnprocessedAttempts: Int = 3
        /// Granularity of deadline, ping and idle checks.
        public var tickInterval: TimeAmount = .milliseconds(100)
        /// Threads of the event loop group the client creates when none is given.
        public var eventLoopThreads: Int = System.coreCount
        public var shutdownGracePeriod: TimeAmount = .seconds(10)

        public init(endpoint: Endpoint, authentication: Authentication, trustRoots: TrustRoots = .system) {
            self.endpoint = endpoint
            self.authentication = authentication
            self.trustRoots = trustRoots
        }

        func makeTLSContext() throws -> NIOSSLContext {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.minimumTLSVersion = .tlsv12
            tls.applicationProtocols = ["h2"]
            tls.certificateVerification = .fullVerification
            switch trustRoots {
            case .system: tls.trustRoots = .default
            case .caFile(let path):
                do {
                    tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(path))
                } catch {
                    throw APNsClientError.unreadableFile(path: path, what: "CA certificate file")
                }
            case .certificates(let certificates): tls.trustRoots = .certificates(certificates)
            }
            if case .certificate(let credentials) = authentication {
                tls.certificateChain = credentials.chain.map { .certificate($0) }
                tls.privateKey = .privateKey(credentials.key)
            }
            return try NIOSSLContext(configuration: tls)
        }
    }

    /// A TLS client certificate with its private key.
    public struct ClientCertificate: Sendable {
        public let chain: [NIOSSLCertificate]
        public let key: NIOSSLPrivateKey

        public init(chain: [NIOSSLCertificate], key: NIOSSLPrivateKey) {
            self.chain = chain
            self.key = key
        }

        /// Loads PEM files. `keyPath` may be nil when the certificate file also holds the key (a
        /// combined PEM, as some tools export).
        public static func load(certificatePath: String, keyPath: String?) throws -> ClientCertificate {
            guard let certificateFile = FileManager.default.contents(atPath: certificatePath) else {
                throw APNsClientError.unreadableFile(path: certificatePath, what: "client certificate (PEM)")
            }
            // NIOSSL's PEM readers stop at blocks of another kind, so a combined file is split by hand.
            let chain = (try? pemBlocks(in: certificateFile, labelled: "CERTIFICATE").map {
                try NIOSSLCertificate(bytes: Array($0.utf8), format: .pem)
            }) ?? []
            guard !chain.isEmpty else {
                throw APNsClientError.unreadableFile(path: certificatePath, what: "client certificate (PEM)")
            }
            let keyFile = keyPath ?? certificatePath
            guard let keyData = keyPath == nil ? certificateFile : FileManager.default.contents(atPath: keyFile),
                let keyBlock = pemBlocks(in: keyData, labelled: "PRIVATE KEY").first,
                let key = try? NIOSSLPrivateKey(bytes: Array(keyBlock.utf8), format: .pem)
            else {
                throw APNsClientError.unreadableFile(path: keyFile, what: "private key (unencrypted PEM)")
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
                throw APNsClientError.unreadableFile(path: path, what: "PKCS#12 bundle (wrong passphrase?)")
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

        /// When the leaf certificate stops being valid.
        public var notValidAfter: Date? {
            guard let leaf = chain.first, let der = try? leaf.toDERBytes(),
                let certificate = try? Certificate(derEncoded: der)
            else { return nil }
            return certificate.notValidAfter
        }
    }
}

/// Errors the client reports when it is set up wrongly. Safe to print: they name files, never keys.
public struct APNsClientError: Error, Hashable, CustomStringConvertible {
    private enum Code: Hashable {
        case unreadableFile(path: String, what: String)
    }
    private let code: Code

    public static func unreadableFile(path: String, what: String) -> APNsClientError {
        APNsClientError(code: .unreadableFile(path: path, what: what))
    }

    public var description: String {
        switch code {
        case .unreadableFile(let path, let what): "cannot read \(what) from \(path)"
        }
    }
}
