import FCMTransport
import Foundation
import PushgateCore
import Testing

/// A prepared request hands each send the FCM message with the TTL left at that moment.
@Suite("Dispatcher: FCM TTL at send time")
struct FCMSendTimeTTLTests {
    let createdAt = Date(timeIntervalSince1970: 1_800_000_000)

    func prepared(_ expiration: Expiration) throws -> FCMPreparedMessage {
        let request = NotificationRequest(
            id: try RequestID("ttl-prepared"),
            expiration: expiration,
            payload: try Payload(jsonString: #"{"aps":{"alert":"x"}}"#),
            createdAt: createdAt
        )
        return FCMPreparedMessage(request: request)
    }

    func ttl(_ message: Result<FCMMessage, ValidationError>) throws -> String? {
        let body = try JSONSerialization.jsonObject(with: Data(try message.get().requestBody(token: "t")))
        let inner = (body as? [String: Any])?["message"] as? [String: Any]
        return (inner?["android"] as? [String: Any])?["ttl"] as? String
    }

    @Test("a send (a retry) later than the request carries the TTL left then, 0s once past the expiration")
    func retryCarriesRemainingTTL() throws {
        let request = try prepared(.at(epochSeconds: 1_800_000_100))
        #expect(try ttl(request.message) == "100s")
        #expect(try ttl(request.message(sentAt: createdAt)) == "100s")
        #expect(try ttl(request.message(sentAt: createdAt.addingTimeInterval(30.2))) == "70s")
        #expect(try ttl(request.message(sentAt: createdAt.addingTimeInterval(30.9))) == "70s", "same second")
        #expect(try ttl(request.message(sentAt: createdAt.addingTimeInterval(31))) == "69s")
        #expect(try ttl(request.message(sentAt: createdAt.addingTimeInterval(500))) == "0s")
    }

    @Test("without an expiration time the message is the one derived at intake")
    func noExpirationTime() throws {
        let immediately = try prepared(.immediately)
        #expect(try ttl(immediately.message(sentAt: createdAt.addingTimeInterval(500))) == "0s")
        let policy = try prepared(.storagePolicy)
        #expect(try ttl(policy.message(sentAt: createdAt.addingTimeInterval(500))) == nil)
    }
}
