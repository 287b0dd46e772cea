import Crypto
import Foundation
import PushgateCore
import Testing

@Suite("ES256 provider token signer")
struct ProviderTokenSignerTests {
    let signer: ProviderTokenSigner

    init() throws {
        signer = try ProviderTokenSigner(
            pemRepresentation: TestKeys.pkcs8PEM,
            keyID: "ABC123DEFG",
            teamID: "DEF123GHIJ"
        )
    }

    private func parts(of token: ProviderToken) throws -> [Substring] {
        let parts = token.jwt.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        return parts
    }

    @Test("the header is exactly alg ES256 and kid, nothing else")
    func header() throws {
        let token = try signer.sign(issuedAt: .testEpoch)
        let header = try #require(base64URLDecode(try parts(of: token)[0]))
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
    }

    @Test("the claims are exactly iss and an integer iat")
    func claims() throws {
        let token = try signer.sign(issuedAt: .testEpoch)
        let claims = try #require(base64URLDecode(try parts(of: token)[1]))
        #expect(String(decoding: claims, as: UTF8.self) == #"{"iss":"DEF123GHIJ","iat":1800000000}"#)
    }

    @Test("a fractional issue time is rounded down to whole seconds, in the claim and in the token")
    func fractionalIssueTime() throws {
        let token = try signer.sign(issuedAt: Date(timeIntervalSince1970: 1_800_000_000.999))
        let claims = try #require(base64URLDecode(try parts(of: token)[1]))
        #expect(String(decoding: claims, as: UTF8.self) == #"{"iss":"DEF123GHIJ","iat":1800000000}"#)
        #expect(token.issuedAt == .testEpoch)
        #expect(token.issuedAtSeconds == 1_800_000_000)
    }

    @Test("every part is base64url without padding")
    func base64URLWithoutPadding() throws {
        for second in 0..<20 {
            let token = try signer.sign(issuedAt: Date.testEpoch.addingTimeInterval(Double(second)))
            #expect(!token.jwt.contains("="))
            #expect(!token.jwt.contains("+"))
            #expect(!token.jwt.contains("/"))
        }
    }

    @Test("the signature is raw r||s and verifies with the key's public half")
    func signatureVerifies() throws {
        let token = try signer.sign(issuedAt: .testEpoch)
        let parts = try parts(of: token)
        let signatureBytes = try #require(base64URLDecode(parts[2]))
        #expect(signatureBytes.count == 64)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        let publicKey = try P256.Signing.PublicKey(pemRepresentation: TestKeys.publicKeyPEM)
        let signingInput = Data("\(parts[0]).\(parts[1])".utf8)
        #expect(publicKey.isValidSignature(signature, for: signingInput))
        #expect(signer.publicKey.rawRepresentation == publicKey.rawRepresentation)
        // ...and not for anything else.
        #expect(!publicKey.isValidSignature(signature, for: Data("\(parts[0]).x".utf8)))
    }

    @Test("the authorization header is bearer and the JWT")
    func authorizationHeader() throws {
        let token = try signer.sign(issuedAt: .testEpoch)
        #expect(token.authorizationHeaderValue == "bearer " + token.jwt)
    }

    @Test("a SEC1 EC PRIVATE KEY is accepted as the same key")
    func sec1Key() throws {
        let sec1 = try ProviderTokenSigner(pemRepresentation: TestKeys.sec1PEM, keyID: "K", teamID: "T")
        #expect(sec1.publicKey.rawRepresentation == signer.publicKey.rawRepresentation)
    }

    @Test("a key file with CRLF line ends, indentation, blank lines and rewrapped base64 is accepted")
    func untidyPEM() throws {
        let body = TestKeys.pkcs8PEM.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let untidy =
            "\r\n  -----BEGIN PRIVATE KEY-----  \r\n\r\n  " + body.prefix(70) + "\r\n" + body.dropFirst(70)
            + "\r\n-----END PRIVATE KEY-----\r\n\r\n"
        let parsed = try ProviderTokenSigner(pemRepresentation: untidy, keyID: "K", teamID: "T")
        #expect(parsed.publicKey.rawRepresentation == signer.publicKey.rawRepresentation)
    }

    @Test("a generated key round-trips through its PEM form")
    func generatedKey() throws {
        let key = P256.Signing.PrivateKey()
        let parsed = try ProviderTokenSigner(pemRepresentation: key.pemRepresentation, keyID: "K", teamID: "T")
        #expect(parsed.publicKey.rawRepresentation == key.publicKey.rawRepresentation)
    }

    /// Key files that are not a P-256 private key in PEM form. An enum, so that test output names
    /// the case instead of printing key material.
    enum NotAP256PrivateKey: String, CaseIterable, Sendable {
        case empty, notPEM, publicKey, p384Key, p521Key, encryptedKeyLabel, labelsThatDiffer
        case bodyNotBase64, emptyBody, truncatedKey, beginLineOnly

        var pem: String {
            switch self {
            case .empty: ""
            case .notPEM: "hello"
            case .publicKey: TestKeys.publicKeyPEM
            case .p384Key: P384.Signing.PrivateKey().pemRepresentation
            case .p521Key: P521.Signing.PrivateKey().pemRepresentation
            case .encryptedKeyLabel: "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----"
            case .labelsThatDiffer: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----"
            case .bodyNotBase64: "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----"
            case .emptyBody: "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----"
            case .truncatedKey:
                TestKeys.pkcs8PEM.replacingOccurrences(
                    of: "d9OzJ8q5btdXqaJ66bVi1BXRa0fwpG1CfbmAR6SUJtr7QZ3gLAnBd0q3\n",
                    with: ""
                )
            case .beginLineOnly: "-----BEGIN PRIVATE KEY-----\nAAAA"
            }
        }
    }

    @Test("anything but a P-256 private key in PEM form is refused", arguments: NotAP256PrivateKey.allCases)
    func malformedKeys(key: NotAP256PrivateKey) {
        #expect(throws: ProviderTokenSignerError.malformedKey) {
            try ProviderTokenSigner(pemRepresentation: key.pem, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        }
    }

    @Test(
        "key ids and team ids that would break the JWT are refused",
        arguments: ["", " ", "ABC 123", "ABC\"1", "AB\\C", "ABC\n", "ÄBC"]
    )
    func invalidIdentifiers(id: String) {
        #expect(throws: ProviderTokenSignerError.invalidKeyID) {
            try ProviderTokenSigner(pemRepresentation: TestKeys.pkcs8PEM, keyID: id, teamID: "DEF123GHIJ")
        }
        #expect(throws: ProviderTokenSignerError.invalidTeamID) {
            try ProviderTokenSigner(pemRepresentation: TestKeys.pkcs8PEM, keyID: "ABC123DEFG", teamID: id)
        }
    }

    @Test("ids of any non-empty printable length are accepted, not only Apple's 10 characters")
    func otherIdentifierLengths() throws {
        let token = try ProviderTokenSigner(pemRepresentation: TestKeys.pkcs8PEM, keyID: "k", teamID: "team-0123456789")
            .sign(issuedAt: .testEpoch)
        let claims = try #require(base64URLDecode(token.jwt.split(separator: ".")[1]))
        #expect(String(decoding: claims, as: UTF8.self) == #"{"iss":"team-0123456789","iat":1800000000}"#)
    }

    @Test("a key file is read from disk; a missing one is an unreadable key file")
    func keyFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-test-\(UUID().uuidString).p8"
        ).path
        try TestKeys.pkcs8PEM.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fromFile = try ProviderTokenSigner(contentsOfFile: path, keyID: "K", teamID: "T")
        #expect(fromFile.publicKey.rawRepresentation == signer.publicKey.rawRepresentation)
        #expect(throws: ProviderTokenSignerError.unreadableKeyFile) {
            try ProviderTokenSigner(contentsOfFile: path + ".missing", keyID: "K", teamID: "T")
        }
    }

    @Test("the signer shows its key id and team id, never the key")
    func signerDescription() {
        let rendered = everyRendering(of: signer)
        #expect("\(signer)" == "ProviderTokenSigner(keyID: ABC123DEFG, teamID: DEF123GHIJ)")
        for line in TestKeys.privateKeyLines { #expect(!rendered.contains(line)) }
        #expect(!rendered.contains("PRIVATE KEY"))
    }

    @Test("a token shows its iat, never the JWT")
    func tokenDescription() throws {
        let token = try signer.sign(issuedAt: .testEpoch)
        #expect("\(token)" == "ProviderToken(iat: 1800000000)")
        let rendered = everyRendering(of: token)
        for part in token.jwt.split(separator: ".") { #expect(!rendered.contains(part)) }
    }

    @Test("errors say what is wrong without quoting the key file")
    func errorDescriptions() {
        let secret = "-----BEGIN PRIVATE KEY-----\nU0VDUkVUU0VDUkVUU0VDUkVU\n-----END PRIVATE KEY-----"
        do throws(ProviderTokenSignerError) {
            _ = try ProviderTokenSigner(pemRepresentation: secret, keyID: "K", teamID: "T")
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "auth key is not a P-256 private key in PEM form")
            let rendered = everyRendering(of: error)
            #expect(!rendered.contains("U0VDUkVU"))
        }
    }
}
