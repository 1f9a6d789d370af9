"""A Python imaplib client for test/e2e/imap-clients.test.ts: logs in, lists the folders, reads
every message of INBOX (UID, flags, size, subject, source) and of each label folder (UIDs),
marks the first message of INBOX read and keyword `from-python`, searches, and prints what it
saw as JSON on stdout. Usage: imap_client.py HOST PORT USER PASSWORD"""
import email
import imaplib
import json
import re
import sys

host, port, user, password = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
out = {}
imap = imaplib.IMAP4(host, port)
imap.login(user, password)

typ, lines = imap.list()
assert typ == 'OK', lines
folders = []
for line in lines:
    m = re.match(rb'\((.*?)\) "(.*?)" "?(.*?)"?$', line)
    folders.append(m.group(3).decode())
out['folders'] = folders

typ, data = imap.select('INBOX')
assert typ == 'OK', data
out['exists'] = int(data[0])

typ, data = imap.uid('FETCH', '1:*', '(UID FLAGS RFC822.SIZE BODY.PEEK[])')
assert typ == 'OK', data
messages = []
for item in data:
    if not isinstance(item, tuple):
        continue
    meta, source = item
    uid = int(re.search(rb'UID (\d+)', meta).group(1))
    flags = re.search(rb'FLAGS \((.*?)\)', meta).group(1).decode().split()
    size = int(re.search(rb'RFC822.SIZE (\d+)', meta).group(1))
    subject = email.message_from_bytes(source)['Subject']
    messages.append({'uid': uid, 'flags': sorted(flags), 'size': size, 'sourceBytes': len(source), 'subject': subject})
out['messages'] = messages

first = messages[0]['uid']
typ, data = imap.uid('STORE', str(first), '+FLAGS', '(\\Seen from-python)')
assert typ == 'OK', data

typ, data = imap.uid('SEARCH', None, 'SUBJECT', '"python"')
assert typ == 'OK', data
out['searchSubjectPython'] = [int(x) for x in data[0].split()]
typ, data = imap.uid('SEARCH', None, 'UNSEEN')
out['searchUnseen'] = [int(x) for x in data[0].split()]

labels = {}
for folder in folders:
    if folder in ('INBOX', 'Sent', 'Drafts', 'Trash'):
        continue
    typ, data = imap.select(folder, readonly=True)
    assert typ == 'OK', data
    typ, data = imap.uid('SEARCH', None, 'ALL')
    labels[folder] = [int(x) for x in data[0].split()]
out['labelFolders'] = labels

imap.logout()
print(json.dumps(out))
