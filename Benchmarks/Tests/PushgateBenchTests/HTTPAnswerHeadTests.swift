import Testing

@testable import pushgate_bench

/// The bench's HTTP client reads answers on bytes (`HTTPAnswerHead`): what it reads of a head.
@Suite struct HTTPAnswerHeadTests {
    private func head(_ text: String) -> HTTPAnswerHead { HTTPAnswerHead(ArraySlice(Array(text.utf8))) }

    @Test("status, Content-Length and keep-alive from a 202 as Hummingbird writes it")
    func accepted() {
        let parsed = head(
            "HTTP/1.1 202 Accepted\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 52\r\n"
                + "Date: Wed, 02 Dec 2026 01:00:00 GMT\r\nServer: pushgate"
        )
        #expect(parsed == HTTPAnswerHead(status: 202, contentLength: 52, close: false, chunked: false))
    }

    @Test("header names in any case; Connection: close; Transfer-Encoding")
    func headerNamesIgnoreCase() {
        #expect(head("HTTP/1.1 400 Bad Request\r\nCONTENT-LENGTH:7\r\nconnection: Close").close)
        #expect(head("HTTP/1.1 400 Bad Request\r\nCONTENT-LENGTH:7\r\nconnection: Close").contentLength == 7)
        #expect(head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked").chunked)
        #expect(!head("HTTP/1.1 200 OK\r\nConnection: keep-alive").close)
    }

    @Test("no status from a line that is not a status line")
    func noStatus() {
        #expect(head("garbage").status == nil)
        #expect(head("HTTP/1.1 2x2 What").status == nil)
        #expect(head("").status == nil)
    }
}

extension HTTPAnswerHead {
    init(status: Int?, contentLength: Int, close: Bool, chunked: Bool) {
        self.init(ArraySlice([]))
        self.status = status
        self.contentLength = contentLength
        self.close = close
        self.chunked = chunked
    }
}
