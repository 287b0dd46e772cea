import Foundation
import Hummingbird
import HummingbirdTesting
import PushgateCore
import PushgateHTTP
import Testing

@Suite("HTTP API: request bodies are read as strict JSON")
struct StrictJSONBodyTests {
    static let d = #""devices": ["\#(tokenA)"]"#

    @Test(
        "what RFC 8259 does not allow is malformed_json",
        arguments: [
            #"{"devices": ["\#(tokenA)"], "payload": {},}"#,  // trailing comma
            #"{"devices": ["\#(tokenA)"], /* c */ "payload": {}}"#,  // comment
            #"{"devices": ["\#(tokenA)"], "payload": {"n": NaN}}"#,
            #"{"devices": ["\#(tokenA)"], "payload": {"n": 012}}"#,  // leading zero
            #"{"devices": ["\#(tokenA)"], "payload": {"n": 1.}}"#,
            #"{"devices": ["\#(tokenA)"], "payload": {"s": "\ud800"}}"#,  // lone surrogate
            #"{"devices": ["\#(tokenA)"], "payload": {"s": "\x"}}"#,  // invalid escape
            "{\"devices\": [\"\(tokenA)\"], \"payload\": {\"s\": \"a\tb\"}}",  // raw control character
            #"{"devices": ["\#(tokenA)"], "payload": {}} x"#,  // trailing bytes
            #"{'devices': []}"#,
            "",
            "\u{FEFF}{\"payload\": {}}",  // byte order mark
            #"{"devices": ["\#(tokenA)"], "payload": {"deep": \#(String(repeating: "[", count: 70))\#(String(repeating: "]", count: 70))}}"#,
        ]
    )
    func malformed(body: String) async throws {
        try await withRouterClient { client, _ in
            let response = try await client.send(.post, "/v1/notifications", json: body)
            #expect(response.status == .badRequest)
            #expect(response.error.code == "malformed_json")
            #expect(response.error.field == "body")
        }
    }

    @Test("a key repeated at any depth is duplicate_key, naming its path")
    func duplicateKeys() async throws {
        try await withRouterClient { client, fixture in
            let cases = [
                (#"{"app": "default", "app": "default", \#(Self.d), "payload": {}}"#, "app"),
                (#"{\#(Self.d), "payload": {"aps": {"alert": "a", "alert": "b"}}}"#, "payload.aps.alert"),
                (#"{\#(Self.d), "payload": {"list": [{"k": 1, "k": 1}]}}"#, "payload.list.k"),
            ]
            for (body, field) in cases {
                let response = try await client.send(.post, "/v1/notifications", json: body)
                #expect(response.status == .badRequest)
                #expect(response.error.code == "duplicate_key")
                #expect(response.error.field == field)
            }
            #expect(try await fixture.store.request(PushgateCore.RequestID("req-1")) == nil)
        }
    }

    @Test("the payload is forwarded as the bytes sent: escapes, numbers, key order and spacing kept")
    func payloadForwardedAsSent() async throws {
        try await withRouterClient { client, fixture in
            let payload =
                #"{ "z": null, "s": "caf\u00e9 \ud83d\ude00 \"q\" \\ \/", "i": -9007199254740993, "f": 2.5e-3,"#
                + #"  "a": true }"#
            let body = #"{\#(Self.d), "payload": \#(payload)}"#
            let response = try await client.send(.post, "/v1/notifications", json: body)
            #expect(response.status == .accepted)
            let stored = try #require(try await fixture.store.request(PushgateCore.RequestID("req-1")))
            #expect(stored.payload.bytes == Array(payload.utf8))
            let object = try JSONSerialization.jsonObject(with: Data(stored.payload.bytes)) as? [String: Any]
            #expect(object?["s"] as? String == "café 😀 \"q\" \\ /")
            #expect(object?["f"] as? Double == 0.0025)
        }
    }
}
