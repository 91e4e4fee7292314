from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Line(_message.Message):
    __slots__ = ("sku", "quantity", "unit_price")
    SKU_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    UNIT_PRICE_FIELD_NUMBER: _ClassVar[int]
    sku: str
    quantity: int
    unit_price: int
    def __init__(self, sku: _Optional[str] = ..., quantity: _Optional[int] = ..., unit_price: _Optional[int] = ...) -> None: ...

class Order(_message.Message):
    __slots__ = ("id", "currency", "lines", "discount_code")
    ID_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    DISCOUNT_CODE_FIELD_NUMBER: _ClassVar[int]
    id: str
    currency: str
    lines: _containers.RepeatedCompositeFieldContainer[Line]
    discount_code: str
    def __init__(self, id: _Optional[str] = ..., currency: _Optional[str] = ..., lines: _Optional[_Iterable[_Union[Line, _Mapping]]] = ..., discount_code: _Optional[str] = ...) -> None: ...

class Placed(_message.Message):
    __slots__ = ("order_id", "total")
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    order_id: str
    total: int
    def __init__(self, order_id: _Optional[str] = ..., total: _Optional[int] = ...) -> None: ...
