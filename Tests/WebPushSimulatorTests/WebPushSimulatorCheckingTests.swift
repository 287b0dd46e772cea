import AsyncHTTPClient
import Crypto
import Foundation
import PushgateCore
import Testing
import WebPush

@testable import WebPushSimulator

@Suite("Web Push simulator: what it checks with cryptography, per message")
struct WebPushSimulatorCheckingTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func token(expiresAt: Int64) -> SimulatorVAPIDVerifier.Verified {
        .init(subject: "mailto:ops@example.com", audience: "https://push.example", expiresAt: expiresAt, publicKey: "k")
    }

    @Test("decryptEvery 1 decrypts every message and never reuses a verified token")
    func checkingMode() {
        var checking = WebPushSimulatorChecking()
        #expect((0..<5).map { _ in checking.messageArrived() } == [true, true, true, true, true])
        checking.tokenVerified(Self.token(expiresAt: 1_800_003_600), header: "vapid t=a", originIndex: 0)
        #expect(checking.verifiedToken(header: "vapid t=a", originIndex: 0, now: Self.now) == nil)
    }

    @Test("decryptEvery 3 decrypts the 1st, 4th, 7th message")
    func sample() {
        var checking = WebPushSimulatorChecking(decryptEvery: 3)
        #expect((0..<7).map { _ in checking.messageArrived() } == [true, false, false, true, false, false, true])
    }

    @Test("a sampled run reuses a verified header on its origin until its exp, and no other header or origin")
    func tokenReuse() {
        var checking = WebPushSimulatorChecking(decryptEvery: 100)
        let token = Self.token(expiresAt: 1_800_000_060)
        #expect(checking.verifiedToken(header: "vapid t=a", originIndex: 0, now: Self.now) == nil)
        checking.tokenVerified(token, header: "vapid t=a", originIndex: 0)
        #expect(checking.verifiedToken(header: "vapid t=a", originIndex: 0, now: Self.now) == token)
        #expect(checking.verifiedToken(header: "vapid t=b", originIndex: 0, now: Self.now) == nil)
        #expect(checking.verifiedToken(header: "vapid t=a", originIndex: 1, now: Self.now) == nil)
        #expect(checking.verifiedToken(header: nil, originIndex: 0, now: Self.now) == nil)
        #expect(
            checking.verifiedToken(header: "vapid t=a", originIndex: 0, now: Self.now.addingTimeInterval(60)) == nil
        )
    }

    @Test("past the cache's limit the verified headers are forgotten")
    func tokenLimit() {
        var checking = WebPushSimulatorChecking(decryptEvery: 2)
        let token = Self.token(expiresAt: 1_800_003_600)
        for index in 0..<WebPushSimulatorChecking.cachedTokenLimit {
            checking.tokenVerified(token, header: "vapid t=\(index)", originIndex: 0)
        }
        #expect(checking.verifiedToken(header: "vapid t=0", originIndex: 0, now: Self.now) == token)
        checking.tokenVerified(token, header: "vapid t=new", originIndex: 0)
        #expect(checking.verifiedToken(header: "vapid t=0", originIndex: 0, now: Self.now) == nil)
        #expect(checking.verifiedToken(header: "vapid t=new", originIndex: 0, now: Self.now) == token)
    }

    @Test("the aes128gcm record header: a WebPush message parses; each malformed field is named")
    func recordHeader() throws {
        let key = P256.KeyAgreement.PrivateKey()
        let p256dh = SimulatorBase64URL.encode(Array(key.publicKey.x963Representation))
        let auth = SimulatorBase64URL.encode([UInt8](repeating: 7, count: 16))
        let json = #"{"endpoint":"https://push.example/p/1","keys":{"p256dh":"\#(p256dh)","auth":"\#(auth)"}}"#
        let browser = try WebPushSubscription(jsonBytes: Array(json.utf8))
        let body = try WebPushEncryption.encrypt(Array("hello".utf8), for: browser)
        let header = try SimulatorRecordHeader(parsing: body)
        #expect(header.salt.count == 16 && header.recordSize >= 18 && header.serverPublicKey.count == 65)
        #expect(header.record.count == body.count - 86)
        func failure(_ bytes: [UInt8]) -> String? {
            do {
                _ = try SimulatorRecordHeader(parsing: bytes)
                return nil
            } catch {
                return error.description
            }
        }
        var smallRecordSize = body
        smallRecordSize[16...19] = [0, 0, 0, 17]
        var shortKeyID = body
        shortKeyID[20] = 33
        var compressedKey = body
        compressedKey[21] = 0x02
        var twoRecords = body
        twoRecords[16...19] = [0, 0, 0, 18]
        #expect(failure(Array(body.prefix(20))) == "body shorter than the aes128gcm header")
        #expect(failure(smallRecordSize) == "record size 17 below 18")
        #expect(failure(shortKeyID) == "keyid must be the 65-byte application server key (idlen 33)")
        #expect(failure(compressedKey) == "keyid must be the 65-byte application server key (idlen 65)")
        #expect(failure(Array(body.prefix(86))) == "no record")
        #expect(failure(twoRecords) == "more than one record")
        #expect(failure(Array(body.prefix(86 + 16))) == "record shorter than its tag")
    }

    @Test(
        "decryptEvery 2 over loopback: every 2nd message decrypted, one signature verified per header, a bad header or record refused on every message"
    )
    func sampledSimulator() async throws {
        var configuration = WebPushSimulator.Configuration()
        configuration.origins = [.init()]
        configuration.controlPort = nil
        configuration.decryptEvery = 2
        try await WebPushSimulator.withRunning(configuration) { simulator in
            try await withClient(trusting: simulator) { client in
                var sender = Sender()
                let subscription = try simulator.createSubscription()
                for index in 1...4 {
                    let message = try sender.message("m\(index)", to: subscription)
                    #expect(
                        try await post(client, message.url, headers: message.headers, body: message.body).status == 201
                    )
                }
                #expect(simulator.received().map(\.plaintext) == [Array("m1".utf8), nil, Array("m3".utf8), nil])
                #expect(simulator.stats().decrypted == 2 && simulator.stats().tokensVerified == 1)

                // The 5th message is decrypted: encrypted for other keys, it is refused.
                let other = try WebPushSubscription(jsonBytes: Array(try simulator.createSubscription().json.utf8))
                let good = try sender.message("m5", to: subscription)
                let wrong = try WebPushEncryption.encrypt([1], for: other)
                #expect(try await post(client, good.url, headers: good.headers, body: wrong).status == 400)
                // Not decrypted, but checked: a record header without the server's key; a bad signature.
                var badHeader = good.body
                badHeader[20] = 64
                #expect(try await post(client, good.url, headers: good.headers, body: badHeader).status == 400)
                let forged = good.headers.map { name, value in
                    (name, name == "authorization" ? value.replacingOccurrences(of: "t=ey", with: "t=eX") : value)
                }
                #expect(try await post(client, good.url, headers: forged, body: good.body).status == 401)
                #expect(simulator.stats().tokensVerified == 1 && simulator.stats().decrypted == 2)
                #expect(simulator.received().count == 4)
            }
        }
        await #expect(throws: (any Error).self) {
            var none = WebPushSimulator.Configuration()
            none.decryptEvery = 0
            try await WebPushSimulator.withRunning(none) { _ in }
        }
    }
}
