import Foundation
import PushgateCore
import Testing

@Suite("FCM service account")
struct FCMServiceAccountTests {
    @Test("a service-account file is read: project, key id, email and token URI")
    func parses() throws {
        let account = try FCMTestAccount.account()
        #expect(account.projectID == "pushgate-test")
        #expect(account.privateKeyID == "0123abcd")
        #expect(account.clientEmail == "pushgate@pushgate-test.iam.gserviceaccount.com")
        #expect(account.tokenURI.absoluteString == FCMTestAccount.tokenURI)
        #expect(account.sendPath == "/v1/projects/pushgate-test/messages:send")
    }

    @Test(
        "each missing or empty required field is named",
        arguments: ["type", "project_id", "private_key_id", "private_key", "client_email", "token_uri"]
    )
    func missingField(name: String) {
        var fields = FCMTestAccount.fields()
        fields[name] = nil
        #expect(throws: FCMCredentialError.missingField(name)) {
            try FCMServiceAccount(jsonBytes: FCMTestAccount.json(fields))
        }
        fields[name] = ""
        #expect(throws: FCMCredentialError.missingField(name)) {
            try FCMServiceAccount(jsonBytes: FCMTestAccount.json(fields))
        }
        fields[name] = 7
        #expect(throws: FCMCredentialError.missingField(name)) {
            try FCMServiceAccount(jsonBytes: FCMTestAccount.json(fields))
        }
    }

    @Test("a file that is not a JSON object, or not a service account, is refused")
    func wrongShape() {
        #expect(throws: FCMCredentialError.malformedJSON) { try FCMServiceAccount(jsonBytes: Array("[1]".utf8)) }
        #expect(throws: FCMCredentialError.malformedJSON) { try FCMServiceAccount(jsonBytes: Array("{".utf8)) }
        var fields = FCMTestAccount.fields()
        fields["type"] = "authorized_user"
        #expect(throws: FCMCredentialError.wrongType) { try FCMServiceAccount(jsonBytes: FCMTestAccount.json(fields)) }
    }

    @Test("a private key that is not RSA PEM, and a token URI that is not https, are named")
    func badKeyAndURI() {
        var fields = FCMTestAccount.fields()
        fields["private_key"] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
        #expect(throws: FCMCredentialError.malformedPrivateKey) {
            try FCMServiceAccount(jsonBytes: FCMTestAccount.json(fields))
        }
        #expect(FCMCredentialError.malformedPrivateKey.field == "private_key")
        for uri in ["http://oauth2.example.test/token", "oauth2.example.test/token", "https://"] {
            fields = FCMTestAccount.fields()
            fields["token_uri"] = uri
            #expect(throws: FCMCredentialError.invalidTokenURI) {
                try FCMServiceAccount(jsonBytes: FCMTestAccount.json(fields))
            }
        }
    }

    @Test("plain http is a token URI only on loopback, for a stand-in on the same machine")
    func httpOnLoopback() throws {
        let accepted = [
            "http://127.0.0.1:8080/token", "http://127.1.2.3/token", "http://localhost:9/token",
            "http://[::1]:8080/token", "https://oauth2.example.test/token",
        ]
        for uri in accepted {
            #expect(FCMServiceAccount.isAcceptableTokenURI(try #require(URL(string: uri))), "\(uri)")
        }
        let refused = [
            "http://10.0.0.1/token", "http://127.0.0.1.example.test/token", "http://128.0.0.1/token",
            "http://localhost.example.test/token", "ftp://127.0.0.1/token", "http:///token",
        ]
        for uri in refused {
            #expect(!FCMServiceAccount.isAcceptableTokenURI(try #require(URL(string: uri))), "\(uri)")
        }
        var fields = FCMTestAccount.fields()
        fields["token_uri"] = "http://127.0.0.1:8080/token"
        let account = try FCMServiceAccount(jsonBytes: FCMTestAccount.json(fields))
        #expect(account.tokenURI.absoluteString == "http://127.0.0.1:8080/token")
    }

    @Test("an unreadable file says so without its contents")
    func unreadable() {
        #expect(throws: FCMCredentialError.unreadableFile) {
            try FCMServiceAccount(contentsOfFile: "/nonexistent/pushgate-fcm.json")
        }
    }

    @Test("descriptions and reflection never show the private key")
    func secretsStayHidden() throws {
        let account = try FCMTestAccount.account()
        let keyBody = FCMTestAccount.privateKeyPEM.split(separator: "\n")[1]
        var dumped = ""
        dump(account, to: &dumped)
        for text in [account.description, String(reflecting: account), dumped] {
            #expect(!text.contains(keyBody))
            #expect(!text.contains("PRIVATE KEY"))
        }
    }
}
