package awstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"

	"github.com/durachat/durachat/shared/aws/awslocal"
	"github.com/durachat/durachat/shared/store"
)

// maxRequestBody bounds what the wrapper reads of one request; DynamoDB's
// own limit for a request is 16 MB.
const maxRequestBody = 16 << 20

// Fidelity is an http.Handler in front of a local DynamoDB server that adds
// what it misses and durachat depends on:
//   - items over 400 KB (attribute name bytes plus value bytes, counted the
//     way DynamoDB counts them) are refused with DynamoDB's
//     ValidationException, for PutItem and UpdateItem and for the puts inside
//     BatchWriteItem and TransactWriteItems;
//   - CreateTable and DescribeTable answer TableStatus ACTIVE, so the
//     SDK's TableExists waiter returns;
//   - a Query whose ExclusiveStartKey names no item starts after where
//     that key would sort, as DynamoDB does (minidyn returns nothing);
//   - every answer carries X-Amz-Crc32, the checksum the SDK verifies.
//
// An UpdateItem, and a Query from a missing start key, hold off all other
// calls: the size of an updated item is known only after the update, which
// is undone when it is too large, and a start key is emulated by a
// placeholder item present only during the query.
type Fidelity struct {
	next http.Handler
	// Faults, when set, answers chosen requests before anything else.
	Faults *Faults
	// exclusive is held alone by the calls above and shared by the rest.
	exclusive sync.RWMutex
}

// NewFidelity wraps next, a DynamoDB JSON-protocol handler.
func NewFidelity(next http.Handler) *Fidelity { return &Fidelity{next: next} }

func (f *Fidelity) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		writeWithCRC(w, dynamoError(http.StatusBadRequest, "SerializationException", "reading request: "+err.Error()))
		return
	}
	if len(body) > maxRequestBody {
		writeWithCRC(w, dynamoError(http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "request is over 16 MB"))
		return
	}
	if f.Faults != nil {
		if a, ok := f.Faults.take(r); ok {
			res := httptest.NewRecorder()
			res.Header().Set("Content-Type", a.ContentType)
			res.WriteHeader(a.Status)
			res.Body.Write(a.Body)
			writeWithCRC(w, res)
			return
		}
	}
	op := operation(r)
	var res *httptest.ResponseRecorder
	switch {
	case op == "UpdateItem":
		f.exclusive.Lock()
		res = f.update(r, body)
		f.exclusive.Unlock()
	case op == "Query" && bytes.Contains(body, []byte(`"ExclusiveStartKey"`)):
		f.exclusive.Lock()
		res = f.queryFrom(r, body)
		f.exclusive.Unlock()
	default:
		f.exclusive.RLock()
		res = f.serve(r, op, body)
		f.exclusive.RUnlock()
	}
	if op == "CreateTable" || op == "DescribeTable" {
		markActive(res)
	}
	writeWithCRC(w, res)
}

// operation is the DynamoDB (or SQS) operation a JSON-protocol request names.
func operation(r *http.Request) string { return awslocal.Operation(r) }

func (f *Fidelity) serve(r *http.Request, op string, body []byte) *httptest.ResponseRecorder {
	if err := checkWriteSizes(op, body); err != nil {
		return err
	}
	return f.forward(r, body)
}

func (f *Fidelity) forward(r *http.Request, body []byte) *httptest.ResponseRecorder {
	return replay(f.next, r, body)
}

// replay serves r with body (already read from r) on next and records the
// answer, so that the caller can look at it before passing it on.
func replay(next http.Handler, r *http.Request, body []byte) *httptest.ResponseRecorder {
	return awslocal.Replay(next, r, body)
}

// call makes one request of its own to the wrapped server.
func (f *Fidelity) call(r *http.Request, op string, input any) (*httptest.ResponseRecorder, error) {
	body, err := json.Marshal(input)
	if err != nil {
		return nil, err
	}
	in := r.Clone(r.Context())
	in.Header = r.Header.Clone()
	in.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	res := f.forward(in, body)
	if res.Code != http.StatusOK {
		return res, fmt.Errorf("%s answered %d: %s", op, res.Code, res.Body.String())
	}
	return res, nil
}

// update applies an UpdateItem and undoes it when the item it leaves is
// over the limit.
func (f *Fidelity) update(r *http.Request, body []byte) *httptest.ResponseRecorder {
	var req struct {
		TableName string
		Key       map[string]json.RawMessage
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return f.forward(r, body) // let the server name the problem
	}
	get := map[string]any{"TableName": req.TableName, "Key": req.Key, "ConsistentRead": true}
	before, err := f.call(r, "GetItem", get)
	if err != nil {
		return before
	}
	res := f.forward(r, body)
	if res.Code != http.StatusOK {
		return res
	}
	after, err := f.call(r, "GetItem", get)
	if err != nil {
		return after
	}
	var stored struct{ Item map[string]attributeValue }
	if err := json.Unmarshal(after.Body.Bytes(), &stored); err != nil {
		return dynamoError(http.StatusInternalServerError, "InternalServerError", "reading updated item: "+err.Error())
	}
	if itemSize(stored.Item) <= store.MaxItemSize {
		return res
	}
	var old struct{ Item map[string]json.RawMessage }
	if err := json.Unmarshal(before.Body.Bytes(), &old); err != nil {
		return dynamoError(http.StatusInternalServerError, "InternalServerError", "reading item before update: "+err.Error())
	}
	if old.Item != nil {
		_, err = f.call(r, "PutItem", map[string]any{"TableName": req.TableName, "Item": old.Item})
	} else {
		_, err = f.call(r, "DeleteItem", map[string]any{"TableName": req.TableName, "Key": req.Key})
	}
	if err != nil {
		return dynamoError(http.StatusInternalServerError, "InternalServerError", "undoing oversized update: "+err.Error())
	}
	return dynamoError(http.StatusBadRequest, "ValidationException", "Item size to update has exceeded the maximum allowed size")
}

// queryFrom runs a Query whose start key may name no item: a placeholder
// holding just the key is put there for the query and removed after.
func (f *Fidelity) queryFrom(r *http.Request, body []byte) *httptest.ResponseRecorder {
	var req struct {
		TableName         string
		ExclusiveStartKey map[string]json.RawMessage
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.ExclusiveStartKey) == 0 {
		return f.forward(r, body)
	}
	get := map[string]any{"TableName": req.TableName, "Key": req.ExclusiveStartKey, "ConsistentRead": true}
	found, err := f.call(r, "GetItem", get)
	if err != nil {
		return f.forward(r, body) // let the server name the problem
	}
	var stored struct{ Item map[string]json.RawMessage }
	if err := json.Unmarshal(found.Body.Bytes(), &stored); err != nil || stored.Item != nil {
		return f.forward(r, body)
	}
	if res, err := f.call(r, "PutItem", map[string]any{"TableName": req.TableName, "Item": req.ExclusiveStartKey}); err != nil {
		return res
	}
	res := f.forward(r, body)
	if _, err := f.call(r, "DeleteItem", map[string]any{"TableName": req.TableName, "Key": req.ExclusiveStartKey}); err != nil {
		return dynamoError(http.StatusInternalServerError, "InternalServerError", "removing start key placeholder: "+err.Error())
	}
	return res
}

// checkWriteSizes answers the ValidationException DynamoDB gives for an
// item over the limit, or nil when every item of the request fits.
func checkWriteSizes(op string, body []byte) *httptest.ResponseRecorder {
	var items []map[string]attributeValue
	switch op {
	case "PutItem":
		var req struct{ Item map[string]attributeValue }
		if json.Unmarshal(body, &req) != nil {
			return nil
		}
		items = append(items, req.Item)
	case "BatchWriteItem":
		var req struct {
			RequestItems map[string][]struct {
				PutRequest *struct{ Item map[string]attributeValue }
			}
		}
		if json.Unmarshal(body, &req) != nil {
			return nil
		}
		for _, writes := range req.RequestItems {
			for _, w := range writes {
				if w.PutRequest != nil {
					items = append(items, w.PutRequest.Item)
				}
			}
		}
	case "TransactWriteItems":
		var req struct {
			TransactItems []struct {
				Put *struct{ Item map[string]attributeValue }
			}
		}
		if json.Unmarshal(body, &req) != nil {
			return nil
		}
		for _, ti := range req.TransactItems {
			if ti.Put != nil {
				items = append(items, ti.Put.Item)
			}
		}
	}
	for _, it := range items {
		if itemSize(it) > store.MaxItemSize {
			return dynamoError(http.StatusBadRequest, "ValidationException", "Item size has exceeded the maximum allowed size")
		}
	}
	return nil
}

// attributeValue is DynamoDB's JSON form of a value; B and BS arrive as
// base64, which encoding/json decodes into bytes.
type attributeValue struct {
	S    *string
	N    *string
	B    []byte
	BOOL *bool
	NULL *bool
	L    []attributeValue
	M    map[string]attributeValue
	SS   []string
	NS   []string
	BS   [][]byte
}

// itemSize counts an item as DynamoDB does: the UTF-8 bytes of every
// attribute name plus the size of its value.
func itemSize(item map[string]attributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v attributeValue) int {
	switch {
	case v.S != nil:
		return len(*v.S)
	case v.N != nil:
		return numberSize(*v.N)
	case v.B != nil:
		return len(v.B)
	case v.BOOL != nil, v.NULL != nil:
		return 1
	case v.L != nil:
		n := 3
		for _, e := range v.L {
			n += 1 + valueSize(e)
		}
		return n
	case v.M != nil:
		n := 3
		for k, e := range v.M {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	case v.SS != nil:
		n := 0
		for _, s := range v.SS {
			n += len(s)
		}
		return n
	case v.NS != nil:
		n := 0
		for _, s := range v.NS {
			n += numberSize(s)
		}
		return n
	case v.BS != nil:
		n := 0
		for _, b := range v.BS {
			n += len(b)
		}
		return n
	}
	return 0
}

// numberSize is one byte per two significant digits plus one.
func numberSize(s string) int {
	mantissa := strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(mantissa, "eE"); i >= 0 {
		mantissa = mantissa[:i]
	}
	mantissa = strings.Replace(mantissa, ".", "", 1)
	mantissa = strings.TrimRight(strings.TrimLeft(mantissa, "0"), "0")
	return int(math.Ceil(float64(len(mantissa))/2)) + 1
}

// markActive sets TableStatus ACTIVE in a CreateTable or DescribeTable
// answer that leaves it empty.
func markActive(res *httptest.ResponseRecorder) {
	if res.Code != http.StatusOK {
		return
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(res.Body.Bytes(), &doc) != nil {
		return
	}
	changed := false
	for _, field := range []string{"Table", "TableDescription"} {
		raw, ok := doc[field]
		if !ok {
			continue
		}
		var table map[string]json.RawMessage
		if json.Unmarshal(raw, &table) != nil {
			continue
		}
		if status := string(table["TableStatus"]); status != "" && status != `""` && status != "null" {
			continue
		}
		table["TableStatus"] = json.RawMessage(`"ACTIVE"`)
		raw, err := json.Marshal(table)
		if err != nil {
			continue
		}
		doc[field] = raw
		changed = true
	}
	if !changed {
		return
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return
	}
	res.Body.Reset()
	res.Body.Write(body)
}

// dynamoError is an error answer in DynamoDB's JSON protocol.
func dynamoError(status int, code, message string) *httptest.ResponseRecorder {
	res := httptest.NewRecorder()
	res.Header().Set("Content-Type", "application/x-amz-json-1.0")
	res.WriteHeader(status)
	body, _ := json.Marshal(map[string]string{
		"__type":  "com.amazonaws.dynamodb.v20120810#" + code,
		"message": message,
	})
	res.Body.Write(body)
	return res
}

// writeWithCRC copies a recorded answer to w with X-Amz-Crc32 added.
func writeWithCRC(w http.ResponseWriter, res *httptest.ResponseRecorder) {
	body := res.Body.Bytes()
	for k, vs := range res.Header() {
		w.Header()[k] = vs
	}
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(res.Code)
	w.Write(body)
}
